package a0py.spark.jvm;

import static a0py.spark.jvm.LittleEndian.le64;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * MCAP, the reading side, in the JVM: the layout of a file, planned from its
 * summary ({@link McapSummary}) or, when it has none, from a scan of its
 * records ({@link McapScan}); a chunk's records are {@link McapChunk}'s. The
 * same rules as a0py/recording/reader.py, whose error texts it keeps:
 *
 * <ul>
 *   <li>Nothing read from a file is trusted: every length and offset is
 *       compared with the bytes actually there before it is used, so a
 *       damaged file is a RecordingFormatException naming the file, the byte
 *       offset and the field, never an OutOfMemoryError.
 *   <li>A file with a valid footer and summary is planned from the summary
 *       alone; a file without one (a recorder killed before closing it) by
 *       a scan of record headers up to its last whole record.
 * </ul>
 *
 * <p>Offsets and opcodes are {@link McapRecords}', generated from the Python
 * reader's table.
 */
final class McapLayout {
  /** The largest header record read (a profile and a library name): a longer one is damage. */
  static final long HEADER_MAX = 1 << 20;

  static final class Channel {
    final int id;
    final int schemaId;
    final String topic;
    final String encoding;
    final Map<String, String> metadata;

    Channel(int id, int schemaId, String topic, String encoding, Map<String, String> metadata) {
      this.id = id;
      this.schemaId = schemaId;
      this.topic = topic;
      this.encoding = encoding;
      this.metadata = metadata;
    }
  }

  /** A schema record's fields. */
  record Schema(int id, String name, String encoding, byte[] data) {}

  /** A chunk record, or a region of message records outside any chunk. */
  static final class Ref implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    final long offset;
    final long length;
    final long uncompressedSize;
    final boolean region;
    final int[] channelIds; // from the message indexes; null when unknown
    final long startTime; // the chunk's message log-time range (ns, unsigned); 0 and -1 when unknown
    final long endTime;

    Ref(long offset, long length, long uncompressedSize, boolean region, int[] channelIds) {
      this(offset, length, uncompressedSize, region, channelIds, 0, -1);
    }

    Ref(long offset, long length, long uncompressedSize, boolean region, int[] channelIds, long startTime,
        long endTime) {
      this.offset = offset;
      this.length = length;
      this.uncompressedSize = uncompressedSize;
      this.region = region;
      this.channelIds = channelIds;
      this.startTime = startTime;
      this.endTime = endTime;
    }

    /** Can this chunk hold messages logged in [lo, hi] (ns, unsigned)? */
    boolean overlaps(long lo, long hi) {
      return Long.compareUnsigned(startTime, hi) <= 0 && Long.compareUnsigned(lo, endTime) <= 0;
    }

    boolean holds(int channelId) {
      if (channelIds == null) {
        return true;
      }
      for (int id : channelIds) {
        if (id == channelId) {
          return true;
        }
      }
      return false;
    }
  }

  final String path;
  final long size;
  final Map<Integer, Channel> channels = new TreeMap<>();
  final Map<Integer, String> schemas = new HashMap<>(); // schema id -> name
  final Map<Integer, String> schemaEncodings = new HashMap<>(); // schema id -> encoding
  final Map<Integer, byte[]> schemaData = new HashMap<>(); // schema id -> data (the decoders')
  final List<Ref> chunks = new ArrayList<>();
  final List<Ref> regions = new ArrayList<>();
  final Map<String, String> chunkMeta = new HashMap<>(); // the a0py.chunks metadata
  boolean hasSummary;

  private McapLayout(String path, long size) {
    this.path = path;
    this.size = size;
  }

  static FileChannel open(String path) {
    try {
      return FileChannel.open(Paths.get(path), StandardOpenOption.READ);
    } catch (IOException e) {
      throw new RecordingOptionException(path + ": cannot open (" + e + ")");
    }
  }

  /** Up to n bytes at offset (fewer at the end of the file). */
  static byte[] pread(FileChannel ch, long n, long offset, String path) {
    checkReadSize(n, offset, path);
    byte[] out = new byte[(int) n];
    int got = preadInto(ch, out, (int) n, offset, path);
    return got == n ? out : Arrays.copyOf(out, got);
  }

  /** A read of n bytes at offset fits an array, else a RecordingFormatException. */
  static void checkReadSize(long n, long offset, String path) {
    if (n < 0 || n > Integer.MAX_VALUE - 16) {
      throw RecordingFormatException.at(path, offset, "a read of " + Long.toUnsignedString(n)
          + " bytes is beyond any record");
    }
  }

  /** Reads n bytes at offset into out[0, n); returns the bytes read (fewer at the end of the file). */
  static int preadInto(FileChannel ch, byte[] out, int n, long offset, String path) {
    ByteBuffer bb = ByteBuffer.wrap(out, 0, n);
    try {
      while (bb.hasRemaining()) {
        if (ch.read(bb, offset + bb.position()) < 0) {
          break;
        }
      }
    } catch (IOException e) {
      throw new RecordingFormatException(path + ": at byte " + offset + ": read failed (" + e + ")");
    }
    return bb.position();
  }

  static Channel parseChannel(byte[] buf, int start, int end, String path, long base) {
    RecordBody b = new RecordBody(buf, path, base, "channel record", start, end);
    int id = b.u16("id");
    int schemaId = b.u16("schema_id");
    String topic = b.string("topic");
    String enc = b.string("message_encoding");
    Map<String, String> meta = new HashMap<>();
    for (String[] kv : b.stringMap("metadata")) {
      meta.put(kv[0], kv[1]);
    }
    return new Channel(id, schemaId, topic, enc, meta);
  }

  static Schema parseSchema(byte[] buf, int start, int end, String path, long base) {
    RecordBody b = new RecordBody(buf, path, base, "schema record", start, end);
    int id = b.u16("id");
    String name = b.string("name");
    String encoding = b.string("encoding");
    long n = b.u32("data");
    b.need(n, "data");
    return new Schema(id, name, encoding, Arrays.copyOfRange(buf, b.pos, b.pos + (int) n));
  }

  void putSchema(Schema sc, boolean ifAbsent) {
    if (ifAbsent && schemas.containsKey(sc.id())) {
      return;
    }
    schemas.put(sc.id(), sc.name());
    schemaEncodings.put(sc.id(), sc.encoding());
    schemaData.put(sc.id(), sc.data());
  }

  /** A metadata record: the a0py.chunks entries are kept. */
  void readMetadata(byte[] buf, int start, int end, long base) {
    RecordBody b = new RecordBody(buf, path, base, "metadata record", start, end);
    String name = b.string("name");
    List<String[]> entries = b.stringMap("metadata");
    if (name.equals("a0py.chunks")) {
      for (String[] e : entries) {
        chunkMeta.put(e[0], e[1]);
      }
    }
  }

  /** A header record's body: checked, nothing kept. */
  void readHeader(byte[] buf, int start, int end, long base) {
    RecordBody b = new RecordBody(buf, path, base, "header record", start, end);
    b.string("profile");
    b.string("library");
  }

  /** The schema ids the channels name that no schema record has given yet. */
  void missingSchemas(Set<Integer> into) {
    for (Channel c : channels.values()) {
      if (c.schemaId != 0 && !schemas.containsKey(c.schemaId)) {
        into.add(c.schemaId);
      }
    }
  }

  /**
   * Why the file at {@code path} holds no record yet (0 bytes, part of the magic, the magic
   * and part of the header record: what a recorder killed before flushing a segment's header
   * leaves), or null when it does. The readers of a set of recordings skip such a file, as the
   * Python reader's {@code read_layout_or_skip} does.
   */
  static String noRecordYet(String path) {
    byte[] magic = McapRecords.MAGIC;
    try (FileChannel ch = open(path)) {
      long size = ch.size();
      if (size == 0) {
        return path + ": the file is empty (0 bytes): no record yet";
      }
      byte[] head = pread(ch, Math.min(size, magic.length + McapRecords.RECORD_HEADER), 0, path);
      int n = Math.min(head.length, magic.length);
      if (!Arrays.equals(Arrays.copyOf(head, n), Arrays.copyOf(magic, n))) {
        return null; // not MCAP at all: read() names it
      }
      if (size < magic.length) {
        return path + ": " + size + " bytes, part of the MCAP magic: no record yet";
      }
      if (size == magic.length) {
        return path + ": the MCAP magic alone (" + size + " bytes): no record yet";
      }
      if (head[magic.length] != McapRecords.Header.OPCODE) {
        return null; // the header record comes first in a0py's files: read() names what is there
      }
      if (size < magic.length + McapRecords.RECORD_HEADER) {
        return path + ": cut short in its header record (" + size + " bytes): no record yet";
      }
      long len = le64(head, magic.length + McapRecords.RECORD_LENGTH);
      if (len >= 0 && len <= HEADER_MAX && magic.length + McapRecords.RECORD_HEADER + len > size) {
        return path + ": at byte " + magic.length + ": cut short in its header record (it claims "
            + len + " bytes): no record yet";
      }
      return null;
    } catch (IOException e) {
      throw new RecordingOptionException(path + ": " + e);
    }
  }

  /** A layout read, and the file's size and modification time when it was. */
  private record Cached(long size, long mtime, McapLayout layout) {}

  private static final int CACHED = 256;
  private static final Map<String, Cached> CACHE = new java.util.LinkedHashMap<>(16, 0.75f, true) {
    private static final long serialVersionUID = 1L;

    @Override
    protected boolean removeEldestEntry(Map.Entry<String, Cached> e) {
      return size() > CACHED;
    }
  };

  /**
   * The layout of the file at {@code path}, read once for the schema and the plan of a read: kept
   * while the file (its inode), its size and its modification time stay the same (a recording still written grows).
   */
  static McapLayout cached(String path) {
    long size;
    long mtime;
    String key;
    try {
      java.nio.file.Path p = Paths.get(path);
      java.nio.file.attribute.BasicFileAttributes a = java.nio.file.Files.readAttributes(p,
          java.nio.file.attribute.BasicFileAttributes.class);
      size = a.size();
      mtime = a.lastModifiedTime().to(java.util.concurrent.TimeUnit.NANOSECONDS);
      key = p.toAbsolutePath() + "\0" + a.fileKey();
    } catch (IOException e) {
      return read(path);
    }
    synchronized (CACHE) {
      Cached hit = CACHE.get(key);
      if (hit != null && hit.size() == size && hit.mtime() == mtime) {
        return hit.layout();
      }
    }
    McapLayout lay = read(path);
    synchronized (CACHE) {
      CACHE.put(key, new Cached(size, mtime, lay));
    }
    return lay;
  }

  /** The layout of the MCAP file at {@code path}. */
  static McapLayout read(String path) {
    try (FileChannel ch = open(path)) {
      long size = ch.size();
      if (size == 0) {
        throw new RecordingFormatException(path + ": the file is empty (0 bytes): not an MCAP recording");
      }
      byte[] head = pread(ch, McapRecords.MAGIC.length, 0, path);
      if (!Arrays.equals(head, McapRecords.MAGIC)) {
        throw new RecordingFormatException(path + ": does not start with the MCAP magic: not an MCAP recording");
      }
      McapLayout lay = new McapLayout(path, size);
      if (!McapSummary.read(ch, lay)) {
        lay.channels.clear();
        lay.schemas.clear();
        lay.schemaEncodings.clear();
        lay.schemaData.clear();
        lay.chunks.clear();
        lay.chunkMeta.clear();
        McapScan.scan(ch, lay);
      }
      return lay;
    } catch (IOException e) {
      throw new RecordingOptionException(path + ": " + e);
    }
  }
}
