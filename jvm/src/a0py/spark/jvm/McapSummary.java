package a0py.spark.jvm;

import static a0py.spark.jvm.LittleEndian.le32;
import static a0py.spark.jvm.LittleEndian.le64;

import java.nio.channels.FileChannel;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.zip.CRC32;

/**
 * Plans a file from its footer and summary (a0py/recording/reader.py's
 * {@code _read_summary}, with its error texts), in four phases: the footer
 * and the summary's bytes (CRC-checked), the summary's records, the chunks
 * from the chunk indexes, the metadata from the metadata indexes. A file
 * whose summary is missing or does not repeat its channels and schemas is
 * left to {@link McapScan}.
 */
final class McapSummary extends LayoutPhase {
  /** A chunk index record's fields that planning uses. */
  private record ChunkIndexEntry(long messageStartTime, long messageEndTime, long chunkStartOffset,
      long chunkLength, long[][] messageIndexOffsets, long messageIndexLength, long uncompressedSize) {}

  /** A metadata index record's byte range. */
  private record MetadataIndexEntry(long offset, long length) {}

  private long summaryStart;
  private byte[] summary;
  private final List<ChunkIndexEntry> chunkIndex = new ArrayList<>();
  private final List<MetadataIndexEntry> metadataIndex = new ArrayList<>();
  private boolean sawChannels;
  private Long messageCount; // the statistics record's, null without one

  private McapSummary(FileChannel ch, McapLayout lay) {
    super(ch, lay);
  }

  /** Fills {@code lay} from the summary; false when the file has none usable (plan it by a scan). */
  static boolean read(FileChannel ch, McapLayout lay) {
    McapSummary s = new McapSummary(ch, lay);
    if (!s.readFooter()) {
      return false;
    }
    s.readRecords();
    if (!s.complete()) {
      return false;
    }
    s.addChunks();
    s.readMetadata();
    s.checkHeader();
    lay.hasSummary = true;
    return true;
  }

  /** The footer and the summary's bytes; false when the file has no footer (cut short) or no summary. */
  private boolean readFooter() {
    byte[] magic = McapRecords.MAGIC;
    int footerRecord = McapRecords.Footer.HEAD;
    if (lay.size < magic.length * 2L + footerRecord) {
      return false;
    }
    long footerOff = lay.size - footerRecord - magic.length;
    byte[] tail = McapLayout.pread(ch, footerRecord + magic.length, footerOff, path);
    if (!Arrays.equals(Arrays.copyOfRange(tail, footerRecord, tail.length), magic)) {
      return false;
    }
    int op = tail[0] & 0xff;
    long length = le64(tail, McapRecords.RECORD_LENGTH);
    summaryStart = le64(tail, McapRecords.Footer.SUMMARY_START);
    long crc = le32(tail, McapRecords.Footer.SUMMARY_CRC);
    if (op != McapRecords.Footer.OPCODE || length != footerRecord - McapRecords.RECORD_HEADER) {
      throw RecordingFormatException.at(path, footerOff, "footer record expected before the closing magic (opcode 0x"
          + Integer.toHexString(op) + ", length " + Long.toUnsignedString(length) + ")");
    }
    if (summaryStart == 0) {
      return false;
    }
    if (summaryStart < magic.length || summaryStart > footerOff) {
      throw RecordingFormatException.at(path, footerOff, "footer: summary_start " + Long.toUnsignedString(summaryStart)
          + " outside the file's records [" + magic.length + ", " + footerOff + "]");
    }
    summary = McapLayout.pread(ch, footerOff - summaryStart, summaryStart, path);
    if (crc != 0) {
      CRC32 c = new CRC32();
      c.update(summary);
      c.update(tail, 0, McapRecords.Footer.SUMMARY_CRC); // the footer up to its own CRC field
      if (c.getValue() != crc) {
        throw RecordingFormatException.at(path, summaryStart, String.format("summary CRC mismatch (footer says "
            + "0x%08x, the bytes give 0x%08x): the summary is damaged", crc, c.getValue()));
      }
    }
    return true;
  }

  /** The summary's records: channels and schemas into the layout, the index records kept for later phases. */
  private void readRecords() {
    int pos = 0;
    while (pos < summary.length) {
      if (pos + McapRecords.RECORD_HEADER > summary.length) {
        throw RecordingFormatException.at(path, summaryStart + pos, "summary: partial record header");
      }
      int op = summary[pos] & 0xff;
      long n = le64(summary, pos + McapRecords.RECORD_LENGTH);
      int bodyAt = pos + McapRecords.RECORD_HEADER;
      if (n < 0 || n > summary.length - bodyAt) {
        throw RecordingFormatException.at(path, summaryStart + pos, "summary: record of opcode 0x"
            + Integer.toHexString(op) + " claims " + Long.toUnsignedString(n) + " bytes, "
            + (summary.length - bodyAt) + " left");
      }
      int end = bodyAt + (int) n;
      if (op == McapRecords.Channel.OPCODE) {
        McapLayout.Channel c = McapLayout.parseChannel(summary, bodyAt, end, path, summaryStart);
        lay.channels.put(c.id, c);
        sawChannels = true;
      } else if (op == McapRecords.Schema.OPCODE) {
        lay.putSchema(McapLayout.parseSchema(summary, bodyAt, end, path, summaryStart), false);
      } else if (op == McapRecords.ChunkIndex.OPCODE) {
        chunkIndex.add(chunkIndexEntry(bodyAt, end));
      } else if (op == McapRecords.Statistics.OPCODE) {
        messageCount = new RecordBody(summary, path, summaryStart, "statistics record", bodyAt, end)
            .u64("message_count");
      } else if (op == McapRecords.MetadataIndex.OPCODE) {
        RecordBody b = new RecordBody(summary, path, summaryStart, "metadata index record", bodyAt, end);
        long off = b.u64("offset");
        long len = b.u64("length");
        b.string("name");
        metadataIndex.add(new MetadataIndexEntry(off, len));
      }
      pos = end;
    }
  }

  private ChunkIndexEntry chunkIndexEntry(int bodyAt, int end) {
    RecordBody b = new RecordBody(summary, path, summaryStart, "chunk index record", bodyAt, end);
    long start = b.u64("message_start_time");
    long stop = b.u64("message_end_time");
    long off = b.u64("chunk_start_offset");
    long len = b.u64("chunk_length");
    long[][] idx = b.u16u64Map("message_index_offsets");
    long idxLen = b.u64("message_index_length");
    b.string("compression");
    b.u64("compressed_size");
    long usize = b.u64("uncompressed_size");
    return new ChunkIndexEntry(start, stop, off, len, idx, idxLen, usize);
  }

  /** Does the summary plan the file alone (a chunk index group, channels and schemas repeated)? */
  private boolean complete() {
    if (chunkIndex.isEmpty() && !(messageCount != null && messageCount == 0)) {
      return false; // messages outside chunks, or no chunk index group: plan by a scan
    }
    if (!sawChannels && !chunkIndex.isEmpty()) {
      return false; // channels were not repeated in the summary
    }
    Set<Integer> missing = new HashSet<>();
    lay.missingSchemas(missing);
    return missing.isEmpty(); // else schemas were not repeated in the summary
  }

  /** The chunks of the chunk indexes, each checked to lie in the data section, in file order. */
  private void addChunks() {
    for (ChunkIndexEntry ci : chunkIndex) {
      long off = ci.chunkStartOffset();
      long len = ci.chunkLength();
      long idxLen = ci.messageIndexLength();
      if (off < McapRecords.MAGIC.length || len < McapRecords.RECORD_HEADER || len > summaryStart
          || off > summaryStart - len) {
        throw RecordingFormatException.at(path, off, "chunk index: chunk [" + Long.toUnsignedString(off) + ", "
            + Long.toUnsignedString(off + len) + ") outside the data section");
      }
      long idxOff = off + len;
      if (idxLen != 0 && (idxLen < 0 || idxLen > summaryStart - idxOff)) {
        throw RecordingFormatException.at(path, idxOff, "chunk index: message index area runs past the data section");
      }
      long[][] idx = ci.messageIndexOffsets();
      int[] ids = idx.length > 0 ? channelsOfIndex(idx, idxOff, idxLen) : null;
      lay.chunks.add(new McapLayout.Ref(off, len, ci.uncompressedSize(), false, ids, ci.messageStartTime(),
          ci.messageEndTime()));
    }
    lay.chunks.sort((a, b) -> Long.compare(a.offset, b.offset));
  }

  /**
   * The channels of a chunk index's message index offsets, each record checked to run to the
   * next one (or to the end of the chunk's index area) with whole entries.
   */
  private int[] channelsOfIndex(long[][] idx, long idxOff, long idxLen) {
    long[][] items = idx.clone();
    Arrays.sort(items, (a, b) -> a[1] != b[1] ? Long.compare(a[1], b[1]) : Long.compare(a[0], b[0]));
    long stop = idxOff + idxLen;
    int[] ids = new int[items.length];
    for (int i = 0; i < items.length; i++) {
      long o = items[i][1];
      long nxt = i + 1 < items.length ? items[i + 1][1] : stop;
      long n = nxt - o - McapRecords.MessageIndex.HEAD;
      if (o < idxOff || nxt > stop || n < 0 || n % McapRecords.MessageIndex.RECORDS_ENTRY != 0) {
        throw RecordingFormatException.at(path, o, "message index of channel " + items[i][0] + ": offset or length "
            + "outside the chunk's index area [" + idxOff + ", " + stop + ")");
      }
      ids[i] = (int) items[i][0];
    }
    return ids;
  }

  /** The metadata records the metadata indexes point at (a0py.chunks is kept). */
  private void readMetadata() {
    for (MetadataIndexEntry mi : metadataIndex) {
      long off = mi.offset();
      long len = mi.length();
      if (off < McapRecords.MAGIC.length || len < McapRecords.RECORD_HEADER || len > summaryStart
          || off > summaryStart - len) {
        throw RecordingFormatException.at(path, off, "metadata index: record outside the data section");
      }
      byte[] rec = McapLayout.pread(ch, len, off, path);
      if ((rec[0] & 0xff) != McapRecords.Metadata.OPCODE) {
        throw RecordingFormatException.at(path, off, "metadata index points at opcode 0x"
            + Integer.toHexString(rec[0] & 0xff) + ", not a metadata record");
      }
      lay.readMetadata(rec, McapRecords.RECORD_HEADER, rec.length, off);
    }
  }

  /** The header record, the file's first: checked. */
  private void checkHeader() {
    int at = McapRecords.MAGIC.length;
    byte[] rec = McapLayout.pread(ch, Math.min(lay.size - at, 4096), at, path);
    if (rec.length < McapRecords.RECORD_HEADER || (rec[0] & 0xff) != McapRecords.Header.OPCODE) {
      throw RecordingFormatException.at(path, at, "the first record is not a header record");
    }
    long n = le64(rec, McapRecords.RECORD_LENGTH);
    if (n < 0 || n > rec.length - McapRecords.RECORD_HEADER) {
      if (n < 0 || n > lay.size - at - McapRecords.RECORD_HEADER) {
        return;
      }
      rec = McapLayout.pread(ch, McapRecords.RECORD_HEADER + n, at, path);
    }
    lay.readHeader(rec, McapRecords.RECORD_HEADER, McapRecords.RECORD_HEADER + (int) n, at);
  }
}
