package a0py.spark.jvm;

import com.github.luben.zstd.Zstd;
import com.github.luben.zstd.ZstdInputStreamNoFinalizer;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.zip.CRC32;
import net.jpountz.lz4.LZ4FrameInputStream;

/**
 * MCAP, the reading side, in the JVM: the layout of a file (from its summary,
 * or from a scan when it has none) and the decompressed records of a chunk.
 * The same rules as the Python reader (a0py/recording/), whose error texts it keeps:
 *
 * <ul>
 *   <li>Nothing read from a file is trusted: every length and offset is
 *       compared with the bytes actually there before it is used, and no
 *       buffer is sized by a length the file has not backed with bytes
 *       (a chunk's uncompressed size is believed only as far as its
 *       compressed bytes plausibly reach, then the buffer grows with the
 *       data), so a damaged file is a RecordingFormatException naming the
 *       file, the byte offset and the field, never an OutOfMemoryError.
 *   <li>A file with a valid footer and summary is planned from the summary
 *       alone; a file without one (a recorder killed before closing it) by
 *       a scan of record headers up to its last whole record.
 * </ul>
 */
final class McapLayout {
  static final byte[] MAGIC = {(byte) 0x89, 'M', 'C', 'A', 'P', '0', '\r', '\n'};
  static final int OP_HEADER = 0x01;
  static final int OP_FOOTER = 0x02;
  static final int OP_SCHEMA = 0x03;
  static final int OP_CHANNEL = 0x04;
  static final int OP_MESSAGE = 0x05;
  static final int OP_CHUNK = 0x06;
  static final int OP_MESSAGE_INDEX = 0x07;
  static final int OP_CHUNK_INDEX = 0x08;
  static final int OP_STATISTICS = 0x0B;
  static final int OP_METADATA = 0x0C;
  static final int OP_METADATA_INDEX = 0x0D;
  static final int OP_DATA_END = 0x0F;
  static final int RECORD_HEADER = 9;
  static final int FOOTER_RECORD = RECORD_HEADER + 20;
  /** A message record: header, channel u16, sequence u32, log_time u64, publish_time u64. */
  static final int MESSAGE_FIXED = RECORD_HEADER + 2 + 4 + 8 + 8;
  static final long MAX_CHUNK_SIZE = Integer.MAX_VALUE - 16;
  /** How far an uncompressed size is believed before the bytes back it (ratio, slack). */
  private static final long PLAUSIBLE_RATIO = 256;
  private static final long PLAUSIBLE_SLACK = 1 << 16;

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

  static RecordingFormatException fail(String path, long offset, String what) {
    return RecordingFormatException.at(path, offset, what);
  }

  static FileChannel open(String path) {
    try {
      return FileChannel.open(Paths.get(path), StandardOpenOption.READ);
    } catch (IOException e) {
      throw new RecordingOptionException(path + ": cannot open (" + e + ")");
    }
  }

  static byte[] pread(FileChannel ch, long n, long offset, String path) {
    if (n < 0 || n > Integer.MAX_VALUE - 16) {
      throw fail(path, offset, "a read of " + Long.toUnsignedString(n) + " bytes is beyond any record");
    }
    byte[] out = new byte[(int) n];
    ByteBuffer bb = ByteBuffer.wrap(out);
    try {
      while (bb.hasRemaining()) {
        int got = ch.read(bb, offset + bb.position());
        if (got < 0) {
          return Arrays.copyOf(out, bb.position());
        }
      }
    } catch (IOException e) {
      throw new RecordingFormatException(path + ": at byte " + offset + ": read failed (" + e + ")");
    }
    return out;
  }

  /** Bounds-checked little-endian reads from one record's body. */
  static final class Body {
    final byte[] buf;
    int pos;
    final int end;
    final String path;
    final long base; // file offset of buf[0]
    final String what;

    Body(byte[] buf, String path, long base, String what, int start, int end) {
      this.buf = buf;
      this.pos = start;
      this.end = end;
      this.path = path;
      this.base = base;
      this.what = what;
    }

    void need(long n, String field) {
      if (n < 0 || n > end - pos) {
        throw fail(path, base + pos, what + ": field " + field + " needs " + Long.toUnsignedString(n)
            + " bytes, " + (end - pos) + " left in the record");
      }
    }

    int u16(String f) {
      need(2, f);
      int v = le16(buf, pos);
      pos += 2;
      return v;
    }

    long u32(String f) {
      need(4, f);
      long v = le32(buf, pos);
      pos += 4;
      return v;
    }

    long u64(String f) {
      need(8, f);
      long v = le64(buf, pos);
      pos += 8;
      return v;
    }

    String string(String f) {
      long n = u32(f);
      need(n, f);
      String s = utf8(buf, pos, (int) n, path, base + pos, what + ": field " + f + " is not UTF-8");
      pos += (int) n;
      return s;
    }

    List<String[]> stringMap(String f) {
      long n = u32(f);
      need(n, f);
      int stop = pos + (int) n;
      Body sub = new Body(buf, path, base, what, pos, stop);
      List<String[]> out = new ArrayList<>();
      while (sub.pos < stop) {
        String k = sub.string(f + " key");
        out.add(new String[] {k, sub.string(f + " value")});
      }
      pos = stop;
      return out;
    }

    long[][] u16u64Map(String f) {
      long n = u32(f);
      need(n, f);
      if (n % 10 != 0) {
        throw fail(path, base + pos, what + ": field " + f + " has " + n + " bytes, not a multiple of 10");
      }
      long[][] out = new long[(int) (n / 10)][];
      for (int i = 0; i < out.length; i++) {
        out[i] = new long[] {le16(buf, pos + 10 * i), le64(buf, pos + 10 * i + 2)};
      }
      pos += (int) n;
      return out;
    }
  }

  // Little-endian views of byte arrays: one bounds-checked load a field (an
  // index past the array throws ArrayIndexOutOfBoundsException, as b[p] does).
  private static final VarHandle LE16 = MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle LE32 = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle LE64 = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

  static int le16(byte[] b, int p) {
    return (short) LE16.get(b, p) & 0xffff;
  }

  static long le32(byte[] b, int p) {
    return (int) LE32.get(b, p) & 0xffffffffL;
  }

  static long le64(byte[] b, int p) {
    return (long) LE64.get(b, p);
  }

  static String utf8(byte[] b, int off, int n, String path, long at, String what) {
    try {
      return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(b, off, n)).toString();
    } catch (CharacterCodingException e) {
      throw fail(path, at, what);
    }
  }

  static Channel parseChannel(byte[] buf, int start, int end, String path, long base) {
    Body b = new Body(buf, path, base, "channel record", start, end);
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

  /** A schema record's id, name, encoding and data. */
  static Object[] parseSchema(byte[] buf, int start, int end, String path, long base) {
    Body b = new Body(buf, path, base, "schema record", start, end);
    int id = b.u16("id");
    String name = b.string("name");
    String encoding = b.string("encoding");
    long n = b.u32("data");
    b.need(n, "data");
    byte[] data = Arrays.copyOfRange(buf, b.pos, b.pos + (int) n);
    return new Object[] {id, name, encoding, data};
  }

  private void putSchema(Object[] sc, boolean ifAbsent) {
    Integer id = (Integer) sc[0];
    if (ifAbsent && schemas.containsKey(id)) {
      return;
    }
    schemas.put(id, (String) sc[1]);
    schemaEncodings.put(id, (String) sc[2]);
    schemaData.put(id, (byte[]) sc[3]);
  }

  /**
   * Why the file at {@code path} holds no record yet (0 bytes, part of the magic, the magic
   * and part of the header record: what a recorder killed before flushing a segment's header
   * leaves), or null when it does. The readers of a set of recordings skip such a file, as the
   * Python reader's {@code read_layout_or_skip} does.
   */
  static String noRecordYet(String path) {
    try (FileChannel ch = open(path)) {
      long size = ch.size();
      if (size == 0) {
        return path + ": the file is empty (0 bytes): no record yet";
      }
      byte[] head = pread(ch, Math.min(size, MAGIC.length + RECORD_HEADER), 0, path);
      int n = Math.min(head.length, MAGIC.length);
      if (!Arrays.equals(Arrays.copyOf(head, n), Arrays.copyOf(MAGIC, n))) {
        return null; // not MCAP at all: read() names it
      }
      if (size < MAGIC.length) {
        return path + ": " + size + " bytes, part of the MCAP magic: no record yet";
      }
      if (size == MAGIC.length) {
        return path + ": the MCAP magic alone (" + size + " bytes): no record yet";
      }
      if (head[MAGIC.length] != 0x01) {
        return null; // the header record comes first in a0py's files: read() names what is there
      }
      if (size < MAGIC.length + RECORD_HEADER) {
        return path + ": cut short in its header record (" + size + " bytes): no record yet";
      }
      long len = le64(head, MAGIC.length + 1);
      if (len >= 0 && len <= (1 << 20) && MAGIC.length + RECORD_HEADER + len > size) {
        return path + ": at byte " + MAGIC.length + ": cut short in its header record (it claims "
            + len + " bytes): no record yet";
      }
      return null;
    } catch (IOException e) {
      throw new RecordingOptionException(path + ": " + e);
    }
  }

  private static final int CACHED = 256;
  private static final Map<String, Object[]> CACHE = new java.util.LinkedHashMap<>(16, 0.75f, true) {
    private static final long serialVersionUID = 1L;

    @Override
    protected boolean removeEldestEntry(Map.Entry<String, Object[]> e) {
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
      Object[] hit = CACHE.get(key);
      if (hit != null && (Long) hit[0] == size && (Long) hit[1] == mtime) {
        return (McapLayout) hit[2];
      }
    }
    McapLayout lay = read(path);
    synchronized (CACHE) {
      CACHE.put(key, new Object[] {size, mtime, lay});
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
      byte[] head = pread(ch, MAGIC.length, 0, path);
      if (!Arrays.equals(head, MAGIC)) {
        throw new RecordingFormatException(path + ": does not start with the MCAP magic: not an MCAP recording");
      }
      McapLayout lay = new McapLayout(path, size);
      if (!lay.readSummary(ch)) {
        lay.channels.clear();
        lay.schemas.clear();
        lay.schemaEncodings.clear();
        lay.schemaData.clear();
        lay.chunks.clear();
        lay.chunkMeta.clear();
        lay.scan(ch);
      }
      return lay;
    } catch (IOException e) {
      throw new RecordingOptionException(path + ": " + e);
    }
  }

  private boolean readSummary(FileChannel ch) {
    if (size < MAGIC.length * 2L + FOOTER_RECORD) {
      return false;
    }
    long footerOff = size - FOOTER_RECORD - MAGIC.length;
    byte[] tail = pread(ch, FOOTER_RECORD + MAGIC.length, footerOff, path);
    if (!Arrays.equals(Arrays.copyOfRange(tail, FOOTER_RECORD, tail.length), MAGIC)) {
      return false;
    }
    int op = tail[0] & 0xff;
    long length = le64(tail, 1);
    long summaryStart = le64(tail, 9);
    long crc = le32(tail, 25);
    if (op != OP_FOOTER || length != 20) {
      throw fail(path, footerOff, "footer record expected before the closing magic (opcode 0x"
          + Integer.toHexString(op) + ", length " + Long.toUnsignedString(length) + ")");
    }
    if (summaryStart == 0) {
      return false;
    }
    if (summaryStart < MAGIC.length || summaryStart > footerOff) {
      throw fail(path, footerOff, "footer: summary_start " + Long.toUnsignedString(summaryStart)
          + " outside the file's records [" + MAGIC.length + ", " + footerOff + "]");
    }
    byte[] summary = pread(ch, footerOff - summaryStart, summaryStart, path);
    if (crc != 0) {
      CRC32 c = new CRC32();
      c.update(summary);
      c.update(tail, 0, FOOTER_RECORD - 4);
      if (c.getValue() != crc) {
        throw fail(path, summaryStart, String.format("summary CRC mismatch (footer says 0x%08x, the bytes give "
            + "0x%08x): the summary is damaged", crc, c.getValue()));
      }
    }
    int pos = 0;
    List<long[]> chunkIndex = new ArrayList<>();
    List<long[][]> chunkIndexMaps = new ArrayList<>();
    List<long[]> metaIndex = new ArrayList<>();
    boolean sawChannels = false;
    Long messageCount = null;
    while (pos < summary.length) {
      if (pos + RECORD_HEADER > summary.length) {
        throw fail(path, summaryStart + pos, "summary: partial record header");
      }
      int rop = summary[pos] & 0xff;
      long n = le64(summary, pos + 1);
      int bodyAt = pos + RECORD_HEADER;
      if (n < 0 || n > summary.length - bodyAt) {
        throw fail(path, summaryStart + pos, "summary: record of opcode 0x" + Integer.toHexString(rop)
            + " claims " + Long.toUnsignedString(n) + " bytes, " + (summary.length - bodyAt) + " left");
      }
      int end = bodyAt + (int) n;
      long base = summaryStart;
      if (rop == OP_CHANNEL) {
        Channel c = parseChannel(summary, bodyAt, end, path, base);
        channels.put(c.id, c);
        sawChannels = true;
      } else if (rop == OP_SCHEMA) {
        putSchema(parseSchema(summary, bodyAt, end, path, base), false);
      } else if (rop == OP_CHUNK_INDEX) {
        Body b = new Body(summary, path, base, "chunk index record", bodyAt, end);
        long start = b.u64("message_start_time");
        long stop = b.u64("message_end_time");
        long off = b.u64("chunk_start_offset");
        long len = b.u64("chunk_length");
        long[][] idx = b.u16u64Map("message_index_offsets");
        long idxLen = b.u64("message_index_length");
        b.string("compression");
        b.u64("compressed_size");
        long usize = b.u64("uncompressed_size");
        chunkIndex.add(new long[] {off, len, idxLen, usize, start, stop});
        chunkIndexMaps.add(idx);
      } else if (rop == OP_STATISTICS) {
        Body b = new Body(summary, path, base, "statistics record", bodyAt, end);
        messageCount = b.u64("message_count");
      } else if (rop == OP_METADATA_INDEX) {
        Body b = new Body(summary, path, base, "metadata index record", bodyAt, end);
        long off = b.u64("offset");
        long len = b.u64("length");
        b.string("name");
        metaIndex.add(new long[] {off, len});
      }
      pos = end;
    }
    if (chunkIndex.isEmpty() && !(messageCount != null && messageCount == 0)) {
      return false; // messages outside chunks, or no chunk index group: plan by a scan
    }
    if (!sawChannels && !chunkIndex.isEmpty()) {
      return false; // channels were not repeated in the summary
    }
    for (Channel c : channels.values()) {
      if (c.schemaId != 0 && !schemas.containsKey(c.schemaId)) {
        return false; // schemas were not repeated in the summary
      }
    }
    for (int i = 0; i < chunkIndex.size(); i++) {
      long[] ci = chunkIndex.get(i);
      long off = ci[0];
      long len = ci[1];
      long idxLen = ci[2];
      if (off < MAGIC.length || len < RECORD_HEADER || len > summaryStart || off > summaryStart - len) {
        throw fail(path, off, "chunk index: chunk [" + Long.toUnsignedString(off) + ", "
            + Long.toUnsignedString(off + len) + ") outside the data section");
      }
      long idxOff = off + len;
      if (idxLen != 0 && (idxLen < 0 || idxLen > summaryStart - idxOff)) {
        throw fail(path, idxOff, "chunk index: message index area runs past the data section");
      }
      long[][] idx = chunkIndexMaps.get(i);
      int[] ids = null;
      if (idx.length > 0) {
        ids = channelsOfIndex(idx, idxOff, idxLen);
      }
      chunks.add(new Ref(off, len, ci[3], false, ids, ci[4], ci[5]));
    }
    chunks.sort((a, b) -> Long.compare(a.offset, b.offset));
    for (long[] mi : metaIndex) {
      long off = mi[0];
      long len = mi[1];
      if (off < MAGIC.length || len < RECORD_HEADER || len > summaryStart || off > summaryStart - len) {
        throw fail(path, off, "metadata index: record outside the data section");
      }
      byte[] rec = pread(ch, len, off, path);
      if ((rec[0] & 0xff) != OP_METADATA) {
        throw fail(path, off, "metadata index points at opcode 0x" + Integer.toHexString(rec[0] & 0xff)
            + ", not a metadata record");
      }
      readMetadata(rec, RECORD_HEADER, rec.length, off);
    }
    readHeader(ch);
    hasSummary = true;
    return true;
  }

  private void readMetadata(byte[] buf, int start, int end, long base) {
    Body b = new Body(buf, path, base, "metadata record", start, end);
    String name = b.string("name");
    List<String[]> entries = b.stringMap("metadata");
    if (name.equals("a0py.chunks")) {
      for (String[] e : entries) {
        chunkMeta.put(e[0], e[1]);
      }
    }
  }

  private void readHeader(FileChannel ch) {
    byte[] rec = pread(ch, Math.min(size - MAGIC.length, 4096), MAGIC.length, path);
    if (rec.length < RECORD_HEADER || (rec[0] & 0xff) != OP_HEADER) {
      throw fail(path, MAGIC.length, "the first record is not a header record");
    }
    long n = le64(rec, 1);
    if (n < 0 || n > rec.length - RECORD_HEADER) {
      if (n < 0 || n > size - MAGIC.length - RECORD_HEADER) {
        return;
      }
      rec = pread(ch, RECORD_HEADER + n, MAGIC.length, path);
    }
    Body b = new Body(rec, path, MAGIC.length, "header record", RECORD_HEADER, RECORD_HEADER + (int) n);
    b.string("profile");
    b.string("library");
  }

  private int[] channelsOfIndex(long[][] idx, long idxOff, long idxLen) {
    long[][] items = idx.clone();
    Arrays.sort(items, (a, b) -> a[1] != b[1] ? Long.compare(a[1], b[1]) : Long.compare(a[0], b[0]));
    long stop = idxOff + idxLen;
    int[] ids = new int[items.length];
    for (int i = 0; i < items.length; i++) {
      long o = items[i][1];
      long nxt = i + 1 < items.length ? items[i + 1][1] : stop;
      long n = nxt - o - (RECORD_HEADER + 2 + 4);
      if (o < idxOff || nxt > stop || n < 0 || n % 16 != 0) {
        throw fail(path, o, "message index of channel " + items[i][0] + ": offset or length outside the chunk's "
            + "index area [" + idxOff + ", " + stop + ")");
      }
      ids[i] = (int) items[i][0];
    }
    return ids;
  }

  /** Plans the file by walking its record headers, up to the last whole record. */
  private void scan(FileChannel ch) {
    long pos = MAGIC.length;
    long regionStart = -1;
    long regionEnd = -1;
    long[] lastChunk = null; // offset, length, usize, start, end
    Set<Integer> idxChans = null;
    while (pos < size) {
      byte[] head = pread(ch, RECORD_HEADER, pos, path);
      if (head.length < RECORD_HEADER) {
        break;
      }
      int op = head[0] & 0xff;
      long n = le64(head, 1);
      if (n < 0 || n > size - pos - RECORD_HEADER) {
        break; // a record cut short: everything before it stands
      }
      long bodyAt = pos + RECORD_HEADER;
      if (op != OP_MESSAGE_INDEX && lastChunk != null) {
        chunks.add(new Ref(lastChunk[0], lastChunk[1], lastChunk[2], false, toIds(idxChans), lastChunk[3],
            lastChunk[4]));
        lastChunk = null;
        idxChans = null;
      }
      if (op != OP_MESSAGE && regionStart >= 0) {
        regions.add(new Ref(regionStart, regionEnd - regionStart, regionEnd - regionStart, true, null));
        regionStart = -1;
      }
      if (op == OP_CHUNK) {
        byte[] fixed = pread(ch, Math.min(n, 8 + 8 + 8 + 4 + 4 + 64 + 8), bodyAt, path);
        Body b = new Body(fixed, path, bodyAt, "chunk record", 0, fixed.length);
        long start = b.u64("message_start_time");
        long stop = b.u64("message_end_time");
        long usize = b.u64("uncompressed_size");
        b.u32("uncompressed_crc");
        b.string("compression");
        long csize = b.u64("records length");
        if (csize < 0 || b.pos + csize != n) {
          throw fail(path, bodyAt, "chunk record: records length " + Long.toUnsignedString(csize)
              + " does not fill the record of " + n + " bytes");
        }
        lastChunk = new long[] {pos, RECORD_HEADER + n, usize, start, stop};
        idxChans = new HashSet<>();
      } else if (op == OP_MESSAGE_INDEX && lastChunk != null) {
        byte[] body = pread(ch, Math.min(n, 6), bodyAt, path);
        Body b = new Body(body, path, bodyAt, "message index record", 0, body.length);
        int cid = b.u16("channel_id");
        long nbytes = b.u32("records");
        if (nbytes + 6 != n || nbytes % 16 != 0) {
          throw fail(path, bodyAt, "message index record: " + nbytes + " bytes of entries in a record of " + n);
        }
        idxChans.add(cid);
      } else if (op == OP_MESSAGE) {
        if (regionStart < 0) {
          regionStart = pos;
        }
        regionEnd = bodyAt + n;
      } else if (op == OP_CHANNEL || op == OP_SCHEMA || op == OP_METADATA || op == OP_HEADER) {
        byte[] body = pread(ch, n, bodyAt, path);
        if (op == OP_CHANNEL) {
          Channel c = parseChannel(body, 0, body.length, path, bodyAt);
          channels.put(c.id, c);
        } else if (op == OP_SCHEMA) {
          putSchema(parseSchema(body, 0, body.length, path, bodyAt), false);
        } else if (op == OP_METADATA) {
          readMetadata(body, 0, body.length, bodyAt);
        } else {
          Body b = new Body(body, path, bodyAt, "header record", 0, body.length);
          b.string("profile");
          b.string("library");
        }
      } else if (op == OP_DATA_END || op == OP_FOOTER) {
        break;
      }
      pos = bodyAt + n;
    }
    if (lastChunk != null) {
      chunks.add(new Ref(lastChunk[0], lastChunk[1], lastChunk[2], false, toIds(idxChans), lastChunk[3],
          lastChunk[4]));
    }
    if (regionStart >= 0) {
      regions.add(new Ref(regionStart, regionEnd - regionStart, regionEnd - regionStart, true, null));
    }
    // Channels (and schemas) whose records lie inside chunks are found by reading those chunks.
    Set<Integer> need = new HashSet<>();
    Set<Integer> needSchemas = new HashSet<>();
    boolean blind = false;
    for (Ref r : chunks) {
      if (r.channelIds == null) {
        blind = true;
      } else {
        for (int id : r.channelIds) {
          if (!channels.containsKey(id)) {
            need.add(id);
          }
        }
      }
    }
    blind &= channels.isEmpty();
    for (Channel c : channels.values()) {
      if (c.schemaId != 0 && !schemas.containsKey(c.schemaId)) {
        needSchemas.add(c.schemaId);
      }
    }
    if (!need.isEmpty() || !needSchemas.isEmpty() || blind) {
      for (Ref r : chunks) {
        byte[] recs = chunkRecords(ch, r, path, false);
        int p = 0;
        while (p + RECORD_HEADER <= recs.length) {
          long ln = le64(recs, p + 1);
          if (ln < 0 || ln > recs.length - p - RECORD_HEADER) {
            break;
          }
          int rop = recs[p] & 0xff;
          if (rop == OP_CHANNEL) {
            Channel c = parseChannel(recs, p + RECORD_HEADER, p + RECORD_HEADER + (int) ln, path, r.offset);
            channels.putIfAbsent(c.id, c);
            if (c.schemaId != 0 && !schemas.containsKey(c.schemaId)) {
              needSchemas.add(c.schemaId);
            }
          } else if (rop == OP_SCHEMA) {
            putSchema(parseSchema(recs, p + RECORD_HEADER, p + RECORD_HEADER + (int) ln, path, r.offset), true);
          }
          p += RECORD_HEADER + (int) ln;
        }
        need.removeAll(channels.keySet());
        needSchemas.removeAll(schemas.keySet());
        if (!blind && need.isEmpty() && needSchemas.isEmpty()) {
          break;
        }
      }
    }
  }

  private static int[] toIds(Set<Integer> s) {
    if (s == null || s.isEmpty()) {
      return null;
    }
    return s.stream().mapToInt(Integer::intValue).sorted().toArray();
  }

  /** The decompressed records of chunk (or region) {@code ref}, CRC-checked when asked. */
  static byte[] chunkRecords(FileChannel ch, Ref ref, String path, boolean validateCrc) {
    if (ref.region) {
      byte[] data = pread(ch, ref.length, ref.offset, path);
      if (data.length != ref.length) {
        throw fail(path, ref.offset, "file shorter than its planned message region (changed since planning?)");
      }
      return data;
    }
    byte[] rec = pread(ch, ref.length, ref.offset, path);
    if (rec.length != ref.length) {
      throw fail(path, ref.offset, "chunk record of " + ref.length + " bytes runs past the end of the file");
    }
    int op = rec[0] & 0xff;
    long n = le64(rec, 1);
    if (op != OP_CHUNK || n != ref.length - RECORD_HEADER) {
      throw fail(path, ref.offset, "expected a chunk record of " + (ref.length - RECORD_HEADER)
          + " bytes, found opcode 0x" + Integer.toHexString(op) + " of " + Long.toUnsignedString(n) + " bytes");
    }
    Body b = new Body(rec, path, ref.offset, "chunk record", RECORD_HEADER, rec.length);
    b.u64("message_start_time");
    b.u64("message_end_time");
    long usize = b.u64("uncompressed_size");
    long crc = b.u32("uncompressed_crc");
    String comp = b.string("compression");
    long clen = b.u64("records length");
    b.need(clen, "records");
    byte[] records = decompress(rec, b.pos, (int) clen, comp, usize, path, ref.offset);
    if (validateCrc && crc != 0) {
      CRC32 c = new CRC32();
      c.update(records);
      if (c.getValue() != crc) {
        throw fail(path, ref.offset, String.format("chunk CRC mismatch (record says 0x%08x, the data gives 0x%08x): "
            + "the chunk is damaged", crc, c.getValue()));
      }
    }
    return records;
  }

  static byte[] decompress(byte[] src, int off, int len, String comp, long size, String path, long at) {
    if (size < 0 || size > MAX_CHUNK_SIZE) {
      throw fail(path, at, "chunk of " + Long.toUnsignedString(size)
          + " uncompressed bytes: chunks above 2 GiB are not supported");
    }
    byte[] out;
    try {
      if (comp.isEmpty()) {
        out = Arrays.copyOfRange(src, off, off + len);
      } else if (comp.equals("zstd")) {
        if (size <= len * PLAUSIBLE_RATIO + PLAUSIBLE_SLACK) {
          byte[] dst = new byte[(int) size];
          long got = Zstd.decompressByteArray(dst, 0, dst.length, src, off, len);
          if (Zstd.isError(got)) {
            throw new IOException(Zstd.getErrorName(got));
          }
          out = got == size ? dst : Arrays.copyOf(dst, (int) got);
        } else {
          out = drain(new ZstdInputStreamNoFinalizer(new ByteArrayInputStream(src, off, len)), len, size);
        }
      } else if (comp.equals("lz4")) {
        out = drain(new LZ4FrameInputStream(new ByteArrayInputStream(src, off, len)), len, size);
      } else {
        throw fail(path, at, "chunk compression '" + comp + "' is not supported (zstd, lz4 or none)");
      }
    } catch (RecordingFormatException e) {
      throw e;
    } catch (Exception e) { // the codecs throw their own classes for damaged input
      throw fail(path, at, comp + " chunk does not decompress (" + e.getClass().getSimpleName() + ": "
          + e.getMessage() + "): the chunk is damaged");
    }
    if (out.length != size) {
      throw fail(path, at, "chunk decompressed to " + out.length + " bytes, its record says " + size);
    }
    return out;
  }

  /** Reads a stream to its end, growing the buffer with the data, never past size + 1 bytes. */
  private static byte[] drain(InputStream in, int compressed, long size) throws IOException {
    try (in) {
      long first = Math.min(size + 1, compressed * PLAUSIBLE_RATIO + PLAUSIBLE_SLACK);
      byte[] buf = new byte[(int) first];
      int n = 0;
      while (true) {
        if (n == buf.length) {
          if (n > size) {
            return Arrays.copyOf(buf, n); // longer than the record says: reported by the caller
          }
          buf = Arrays.copyOf(buf, (int) Math.min(size + 1, 2L * buf.length));
        }
        int got = in.read(buf, n, buf.length - n);
        if (got < 0) {
          return n == buf.length ? buf : Arrays.copyOf(buf, n);
        }
        n += got;
      }
    }
  }
}
