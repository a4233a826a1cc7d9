package a0py.spark.jvm;

import static a0py.spark.jvm.LittleEndian.le64;

import java.nio.channels.FileChannel;
import java.util.HashSet;
import java.util.Set;

/**
 * Plans a file that has no usable summary (a recorder killed before closing
 * it) by walking its record headers from the start up to its last whole
 * record (a0py/recording/reader.py's {@code _scan}, with its error texts),
 * in two phases: the walk (chunk heads and their message indexes, message
 * regions outside chunks, the small records), then the channels and schemas
 * whose records lie inside chunks.
 */
final class McapScan extends LayoutPhase {
  /** A chunk record's fields before its records, with a compression name of up to 64 bytes. */
  private static final int CHUNK_HEAD_MAX = McapRecords.Chunk.HEAD - McapRecords.RECORD_HEADER + 64 + Long.BYTES;
  /** A message index record's body up to its entries. */
  private static final int MESSAGE_INDEX_FIXED = McapRecords.MessageIndex.HEAD - McapRecords.RECORD_HEADER;

  /** A chunk record the walk has passed, and the channels of the message index records after it. */
  private record ScannedChunk(long offset, long length, long uncompressedSize, long startTime, long endTime,
      Set<Integer> channels) {
    McapLayout.Ref ref() {
      int[] ids = channels.isEmpty() ? null : channels.stream().mapToInt(Integer::intValue).sorted().toArray();
      return new McapLayout.Ref(offset, length, uncompressedSize, false, ids, startTime, endTime);
    }
  }

  private McapScan(FileChannel ch, McapLayout lay) {
    super(ch, lay);
  }

  /** Plans {@code lay} by a scan. */
  static void scan(FileChannel ch, McapLayout lay) {
    McapScan s = new McapScan(ch, lay);
    s.walk();
    s.findChannelsInChunks();
  }

  /** The walk: every record header up to a record cut short, the DataEnd or the footer. */
  private void walk() {
    long pos = McapRecords.MAGIC.length;
    long regionStart = -1;
    long regionEnd = -1;
    ScannedChunk chunk = null;
    while (pos < lay.size) {
      byte[] head = McapLayout.pread(ch, McapRecords.RECORD_HEADER, pos, path);
      if (head.length < McapRecords.RECORD_HEADER) {
        break;
      }
      int op = head[0] & 0xff;
      long n = le64(head, McapRecords.RECORD_LENGTH);
      if (n < 0 || n > lay.size - pos - McapRecords.RECORD_HEADER) {
        break; // a record cut short: everything before it stands
      }
      long bodyAt = pos + McapRecords.RECORD_HEADER;
      if (op != McapRecords.MessageIndex.OPCODE && chunk != null) {
        lay.chunks.add(chunk.ref());
        chunk = null;
      }
      if (op != McapRecords.Message.OPCODE && regionStart >= 0) {
        lay.regions.add(region(regionStart, regionEnd));
        regionStart = -1;
      }
      if (op == McapRecords.Chunk.OPCODE) {
        chunk = chunkHead(pos, n);
      } else if (op == McapRecords.MessageIndex.OPCODE && chunk != null) {
        chunk.channels().add(messageIndexChannel(bodyAt, n));
      } else if (op == McapRecords.Message.OPCODE) {
        if (regionStart < 0) {
          regionStart = pos;
        }
        regionEnd = bodyAt + n;
      } else if (op == McapRecords.Channel.OPCODE || op == McapRecords.Schema.OPCODE
          || op == McapRecords.Metadata.OPCODE || op == McapRecords.Header.OPCODE) {
        smallRecord(op, bodyAt, n);
      } else if (op == McapRecords.DataEnd.OPCODE || op == McapRecords.Footer.OPCODE) {
        break;
      }
      pos = bodyAt + n;
    }
    if (chunk != null) {
      lay.chunks.add(chunk.ref());
    }
    if (regionStart >= 0) {
      lay.regions.add(region(regionStart, regionEnd));
    }
  }

  private static McapLayout.Ref region(long start, long end) {
    return new McapLayout.Ref(start, end - start, end - start, true, null);
  }

  /** The chunk record at pos (body of n bytes): its fixed fields, its records not read. */
  private ScannedChunk chunkHead(long pos, long n) {
    long bodyAt = pos + McapRecords.RECORD_HEADER;
    byte[] fixed = McapLayout.pread(ch, Math.min(n, CHUNK_HEAD_MAX), bodyAt, path);
    RecordBody b = new RecordBody(fixed, path, bodyAt, "chunk record", 0, fixed.length);
    long start = b.u64("message_start_time");
    long stop = b.u64("message_end_time");
    long usize = b.u64("uncompressed_size");
    b.u32("uncompressed_crc");
    b.string("compression");
    long csize = b.u64("records length");
    if (csize < 0 || b.pos + csize != n) {
      throw RecordingFormatException.at(path, bodyAt, "chunk record: records length " + Long.toUnsignedString(csize)
          + " does not fill the record of " + n + " bytes");
    }
    return new ScannedChunk(pos, McapRecords.RECORD_HEADER + n, usize, start, stop, new HashSet<>());
  }

  /** The channel_id of the message index record whose n-byte body is at bodyAt, its entries checked whole. */
  private int messageIndexChannel(long bodyAt, long n) {
    byte[] body = McapLayout.pread(ch, Math.min(n, MESSAGE_INDEX_FIXED), bodyAt, path);
    RecordBody b = new RecordBody(body, path, bodyAt, "message index record", 0, body.length);
    int cid = b.u16("channel_id");
    long nbytes = b.u32("records");
    if (nbytes + MESSAGE_INDEX_FIXED != n || nbytes % McapRecords.MessageIndex.RECORDS_ENTRY != 0) {
      throw RecordingFormatException.at(path, bodyAt, "message index record: " + nbytes
          + " bytes of entries in a record of " + n);
    }
    return cid;
  }

  /** A channel, schema, metadata or header record met by the walk, into the layout. */
  private void smallRecord(int op, long bodyAt, long n) {
    byte[] body = McapLayout.pread(ch, n, bodyAt, path);
    if (op == McapRecords.Channel.OPCODE) {
      McapLayout.Channel c = McapLayout.parseChannel(body, 0, body.length, path, bodyAt);
      lay.channels.put(c.id, c);
    } else if (op == McapRecords.Schema.OPCODE) {
      lay.putSchema(McapLayout.parseSchema(body, 0, body.length, path, bodyAt), false);
    } else if (op == McapRecords.Metadata.OPCODE) {
      lay.readMetadata(body, 0, body.length, bodyAt);
    } else {
      lay.readHeader(body, 0, body.length, bodyAt);
    }
  }

  /**
   * Channels (and schemas) whose records lie inside chunks, as the mcap package's writer puts
   * them, found by reading those chunks: when a message index names a channel not seen yet, a
   * channel names a schema not seen yet, or chunks without a message index come with no channel
   * record outside chunks at all.
   */
  private void findChannelsInChunks() {
    Set<Integer> need = new HashSet<>();
    Set<Integer> needSchemas = new HashSet<>();
    boolean blind = false;
    for (McapLayout.Ref r : lay.chunks) {
      if (r.channelIds == null) {
        blind = true;
      } else {
        for (int id : r.channelIds) {
          if (!lay.channels.containsKey(id)) {
            need.add(id);
          }
        }
      }
    }
    blind &= lay.channels.isEmpty();
    lay.missingSchemas(needSchemas);
    if (need.isEmpty() && needSchemas.isEmpty() && !blind) {
      return;
    }
    for (McapLayout.Ref r : lay.chunks) {
      readChannelsOfChunk(McapChunk.records(ch, r, path, false), r.offset, needSchemas);
      need.removeAll(lay.channels.keySet());
      needSchemas.removeAll(lay.schemas.keySet());
      if (!blind && need.isEmpty() && needSchemas.isEmpty()) {
        break;
      }
    }
  }

  /** The channel and schema records among a chunk's records, into the layout (the first of an id wins). */
  private void readChannelsOfChunk(byte[] recs, long base, Set<Integer> needSchemas) {
    int p = 0;
    while (p + McapRecords.RECORD_HEADER <= recs.length) {
      long ln = le64(recs, p + McapRecords.RECORD_LENGTH);
      if (ln < 0 || ln > recs.length - p - McapRecords.RECORD_HEADER) {
        break;
      }
      int op = recs[p] & 0xff;
      int bodyAt = p + McapRecords.RECORD_HEADER;
      if (op == McapRecords.Channel.OPCODE) {
        McapLayout.Channel c = McapLayout.parseChannel(recs, bodyAt, bodyAt + (int) ln, path, base);
        lay.channels.putIfAbsent(c.id, c);
        if (c.schemaId != 0 && !lay.schemas.containsKey(c.schemaId)) {
          needSchemas.add(c.schemaId);
        }
      } else if (op == McapRecords.Schema.OPCODE) {
        lay.putSchema(McapLayout.parseSchema(recs, bodyAt, bodyAt + (int) ln, path, base), true);
      }
      p = bodyAt + (int) ln;
    }
  }
}
