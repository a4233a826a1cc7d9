package a0py.spark.jvm;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Reads one partition: one columnar batch a chunk (its frame rows, then its
 * gap rows), in phases: the chunk's records decompressed ({@link McapChunk})
 * and walked, the rows that pass the pushed filters selected ({@link
 * FrameRows}; a typed topic's payload joined with its headers message, from
 * this chunk or a chunk near it), the gap messages parsed ({@link GapRow}),
 * and the rows written into the batch ({@link BatchColumns}).
 *
 * <p>The rows are the Python source's (a0py/spark/part_reader.py). The
 * packet checks are the C decoder's ({@link PacketFields}): the first packet
 * that fails is an error naming the file, chunk and message. With
 * decode=true (ROS 2 channels, planned by RosDecode) each foreign message is
 * decoded by its channel's CdrDecoder into the message column, or its error
 * into decode_error.
 */
final class A0PartitionReader implements PartitionReader<ColumnarBatch> {
  static final class Factory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    private final ReadOptions read;
    private final Predicate predicate;
    private final StructType schema;
    private final Aggregates aggregates;

    Factory(ReadOptions read, Predicate predicate, StructType schema, Aggregates aggregates) {
      this.read = read;
      this.predicate = predicate;
      this.schema = schema;
      this.aggregates = aggregates;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      throw new UnsupportedOperationException("the a0 JVM reader is columnar");
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
      return new A0PartitionReader((A0Scan.Partition) partition, read, predicate, schema, aggregates);
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
      return true;
    }
  }

  /** The offsets of a chunk's message records, in [0, count). */
  private static final class Offsets {
    int[] at = new int[256];
    int count;
  }

  /** A chunk read for the headers messages it holds: (headers channel, sequence) -> record offset. */
  private static final class Companion {
    final byte[] recs;
    final HashMap<Long, Integer> index = new HashMap<>();

    Companion(byte[] recs) {
      this.recs = recs;
    }
  }

  private final A0Scan.Partition part;
  private final ReadOptions read;
  private final Predicate predicate;
  private final BatchColumns columns;
  private final Aggregates.State aggregates; // pushed aggregates: the partition's partial results, else null
  private ColumnarBatch aggregated; // their one-row batch, once given
  private final Map<Integer, CdrDecoder> decoders = new HashMap<>(); // by channel id, for the current slice
  private final Map<String, CdrDecoder> decoderCache = new HashMap<>();

  private int sliceIndex;
  private int refIndex;
  private FileChannel file;
  private final McapChunk.Reader chunk = new McapChunk.Reader(true); // the current chunk's records
  private final Offsets msgs = new Offsets(); // the current chunk's message records
  private RowChannel[] channels = new RowChannel[0]; // by channel id: the current file's, null for none
  private final Map<Long, Companion> companions = new java.util.LinkedHashMap<>(8, 0.75f, true) {
    private static final long serialVersionUID = 1L;

    @Override
    protected boolean removeEldestEntry(Map.Entry<Long, Companion> e) {
      return size() > 2 * A0Scan.COMPANIONS;
    }
  };
  private long bytesRead;
  private long chunksRead;

  // The current chunk: its kept frame rows, its gap messages, and the
  // headers messages its typed rows were joined with.
  private final FrameRows rows = new FrameRows();
  private final PacketFields packet = new PacketFields();
  private int gaps;
  private int[] gapMsgs = new int[16];
  private HashMap<Long, Integer> ownHeaders; // this chunk's headers messages, once a typed row needs them
  private boolean loadedNear;
  private byte[] foundHdrBuf; // set by findHeaders
  private int foundHdrOff;
  // Headers messages in their payloads' family, turned back into message records of cut packets:
  // only ever appended to (rows point into it), a new array once full.
  private byte[] cutRecs = new byte[0];
  private int cutUsed;

  A0PartitionReader(A0Scan.Partition part, ReadOptions read, Predicate predicate, StructType schema,
      Aggregates aggregates) {
    this.part = part;
    this.read = read;
    this.predicate = predicate;
    this.columns = new BatchColumns(schema);
    this.aggregates = aggregates == null ? null : aggregates.new State();
  }

  @Override
  public boolean next() throws IOException {
    while (sliceIndex < part.slices.size()) {
      A0Scan.Slice slice = part.slices.get(sliceIndex);
      if (file == null) {
        openSlice(slice);
      }
      if (refIndex < slice.refs.length) {
        McapLayout.Ref ref = slice.refs[refIndex];
        McapLayout.Ref[] near = slice.companions == null ? null : slice.companions[refIndex];
        refIndex++;
        if (readChunk(slice.path, ref, near) > 0) {
          return true;
        }
        continue;
      }
      file.close();
      file = null;
      refIndex = 0;
      sliceIndex++;
    }
    if (aggregates != null && aggregated == null) {
      aggregated = aggregates.batch();
      return true;
    }
    return false;
  }

  private void openSlice(A0Scan.Slice slice) {
    file = McapLayout.open(slice.path);
    java.util.Arrays.fill(channels, null);
    companions.clear();
    decoders.clear();
    for (int i = 0; i < slice.channelIds.length; i++) {
      putChannel(slice.channelIds[i], new RowChannel(slice.topics[i], slice.kinds[i], slice.schemaNames[i],
          slice.encodings[i], slice.headerIds[i]));
      if (columns.decodes() && slice.decodeSchemas != null && slice.decodeSchemas[i] != null) {
        decoders.put(slice.channelIds[i], decoder(slice.schemaNames[i], slice.decodeSchemas[i]));
      }
    }
  }

  /** The decoder of a ros2msg definition (planned as one the JVM decodes), writing the asked-for fields. */
  private CdrDecoder decoder(String schemaName, byte[] data) {
    String key = schemaName + "\0" + new String(data, StandardCharsets.ISO_8859_1);
    CdrDecoder d = decoderCache.get(key);
    if (d == null) {
      Map<String, java.util.List<RosMsg.Field>> types = RosDecode.types(schemaName, data);
      if (types == null) {
        throw new RecordingFormatException(part.slices.get(sliceIndex).path + ": schema " + schemaName
            + " no longer parses as planned");
      }
      StructType want = columns.messageType != null ? columns.messageType : CdrDecoder.sparkType(types);
      d = new CdrDecoder(types, want, schemaName);
      decoderCache.put(key, d);
    }
    return d;
  }

  @Override
  public org.apache.spark.sql.connector.metric.CustomTaskMetric[] currentMetricsValues() {
    return new org.apache.spark.sql.connector.metric.CustomTaskMetric[] {
      ReadMetrics.task(ReadMetrics.BYTES, bytesRead), ReadMetrics.task(ReadMetrics.CHUNKS, chunksRead)};
  }

  @Override
  public ColumnarBatch get() {
    return aggregated != null ? aggregated : columns.batch;
  }

  @Override
  public void close() throws IOException {
    if (file != null) {
      file.close();
      file = null;
    }
    columns.batch.close();
    if (aggregated != null) {
      aggregated.close();
    }
    chunk.close();
  }

  private RowChannel channel(int id) {
    return id < channels.length ? channels[id] : null;
  }

  private void putChannel(int id, RowChannel ch) {
    if (id >= channels.length) {
      channels = Arrays.copyOf(channels, Math.max(id + 1, 2 * channels.length));
    }
    channels[id] = ch;
  }

  /** Decodes one chunk into the batch; returns its row count. */
  private int readChunk(String path, McapLayout.Ref ref, McapLayout.Ref[] near) {
    McapChunk.read(chunk, file, ref, path, read.validateCrc);
    byte[] recs = chunk.records;
    bytesRead += ref.length;
    chunksRead++;
    String where = path + ": " + (ref.region ? "message region" : "chunk") + " at byte " + ref.offset;
    walk(recs, chunk.length, path, ref, where, msgs);
    selectRows(path, recs, near, where);
    GapRow[] gapRows = gaps > 0 ? GapRow.of(recs, gapMsgs, gaps, where, predicate) : GapRow.NONE;
    int frames = rows.count;
    int total = frames + gapRows.length;
    if (aggregates != null) {
      aggregate(gapRows);
      return 0; // no batch: the partition's results come after its last chunk
    }
    columns.reset(recs, total);
    boolean decodes = columns.decodes();
    for (int r = 0; r < frames; r++) {
      int o = msgs.at[rows.msg[r]];
      int cid = MessageRecords.channelId(recs, o);
      CdrDecoder dec = decodes && rows.kind[r] == FrameRows.RAW ? decoders.get(cid) : null;
      columns.putFrameRow(r, rows, recs, o, cid, channel(cid), dec, where);
    }
    for (int g = 0; g < gapRows.length; g++) {
      RowChannel ch = channel(MessageRecords.channelId(recs, gapRows[g].recordOffset()));
      columns.putGapRow(frames + g, gapRows[g], recs, ch);
    }
    columns.batch.setNumRows(total);
    return total;
  }

  /** Adds the chunk's rows (its kept frame rows, then its gap rows) to the pushed aggregates. */
  private void aggregate(GapRow[] gapRows) {
    for (int r = 0; r < rows.count; r++) {
      aggregates.add(rows.kind[r] != FrameRows.RAW, rows.seq[r]);
    }
    for (GapRow g : gapRows) {
      aggregates.add(true, g.first());
    }
  }

  /**
   * The records of a chunk (recs[0, n)): the offset of each message record into {@code into},
   * each checked to hold a message's fixed fields; a channel record the plan did not know is learnt.
   */
  private void walk(byte[] recs, int n, String path, McapLayout.Ref ref, String where, Offsets into) {
    int head = McapRecords.RECORD_HEADER;
    int[] msgs = into.at;
    int count = 0;
    int pos = 0;
    while (pos < n) {
      if (pos + head > n) {
        throw RecordingFormatException.at(path, ref.offset, "chunk records: partial record header at " + pos + " of "
            + n);
      }
      int op = recs[pos] & 0xff;
      long ln = LittleEndian.le64(recs, pos + McapRecords.RECORD_LENGTH);
      if (ln < 0 || ln > n - pos - head) {
        throw RecordingFormatException.at(path, ref.offset, "chunk records: record of opcode 0x"
            + Integer.toHexString(op) + " at " + pos + " claims " + Long.toUnsignedString(ln) + " bytes, "
            + (n - pos - head) + " left");
      }
      int end = pos + head + (int) ln;
      if (op == McapRecords.Message.OPCODE) {
        if (ln < McapRecords.Message.DATA - head) {
          throw new RecordingFormatException(where + ": message " + count + ": record of " + ln
              + " bytes, shorter than a message's fixed fields");
        }
        if (count == msgs.length) {
          msgs = Arrays.copyOf(msgs, 2 * count);
        }
        msgs[count++] = pos;
      } else if (op == McapRecords.Channel.OPCODE) {
        learnChannel(McapLayout.parseChannel(recs, pos + head, end, path, ref.offset));
      }
      pos = end;
    }
    into.at = msgs;
    into.count = count;
  }

  /** A channel the plan did not know (its record only inside this chunk): no schema name to give. */
  private void learnChannel(McapLayout.Channel ch) {
    byte kind = A0Scan.kindOf(ch);
    if (kind != 0 && channel(ch.id) == null) {
      putChannel(ch.id, new RowChannel(A0Scan.rowTopic(ch, kind), kind, null, ch.encoding, headersIdOf(ch, kind)));
    }
  }

  private int headersIdOf(McapLayout.Channel ch, byte kind) {
    if (kind != A0Scan.KIND_TYPED) {
      return -1;
    }
    String t = ch.metadata.get(A0Scan.HEADERS_KEY);
    for (int id = 0; id < channels.length; id++) {
      if (channels[id] != null && channels[id].kind == A0Scan.KIND_HEADERS && channels[id].topic.equals(t)) {
        return id;
      }
    }
    return -1;
  }

  /**
   * The rows of the chunk's messages that pass the pushed filters into {@link #rows}, its gap
   * messages into {@link #gapMsgs} (when gaps are read); a typed message's headers message is
   * looked up in this chunk, then in the chunks near it.
   */
  private void selectRows(String path, byte[] recs, McapLayout.Ref[] near, String where) {
    rows.clear();
    gaps = 0;
    ownHeaders = null;
    loadedNear = false;
    int[] at = msgs.at;
    for (int i = 0; i < msgs.count; i++) {
      int o = at[i];
      RowChannel ch = channel(MessageRecords.channelId(recs, o));
      if (ch == null || ch.kind == A0Scan.KIND_HEADERS) {
        continue;
      }
      if (ch.kind == A0Scan.KIND_GAP) {
        if (read.gaps) {
          addGap(o);
        }
        continue;
      }
      if (!predicate.topicOk(ch.topic) || !predicate.logOk(MessageRecords.logUs(recs, o))) {
        continue;
      }
      if (ch.kind == A0Scan.KIND_PACKET) {
        if (predicate.wallOk(MessageRecords.wallUs(recs, o))) {
          keepPacket(i, recs, o, FrameRows.PACKET, where);
        }
        continue;
      }
      if (ch.kind == A0Scan.KIND_TYPED && ch.headersId >= 0
          && findHeaders(path, recs, hdrKey(ch.headersId, MessageRecords.sequence(recs, o)), near)) {
        if (predicate.wallOk(MessageRecords.wallUs(foundHdrBuf, foundHdrOff))) {
          keepPacket(i, foundHdrBuf, foundHdrOff, FrameRows.JOINED, where);
        }
        continue;
      }
      // A foreign message, or a typed one whose headers message is missing: the message as recorded.
      if (predicate.hasSeqBound() || !predicate.wallOk(MessageRecords.wallUs(recs, o))) {
        continue; // its seq is NULL, which no seq filter passes
      }
      rows.add(i, -1, Long.MIN_VALUE, FrameRows.RAW, null, 0);
    }
    if (!loadedNear) {
      companions.clear(); // the chunks near this one were not needed: none kept for the next
    }
  }

  private void addGap(int o) {
    if (gaps == gapMsgs.length) {
      gapMsgs = Arrays.copyOf(gapMsgs, 2 * gaps);
    }
    gapMsgs[gaps++] = o;
  }

  /**
   * Keeps message i when its packet (whole, or a typed topic's headers message: buf's Message
   * record at o) passes the checks and the seq filter. A packet that fails the checks is an
   * error naming the chunk ({@code where}) and the message.
   */
  private void keepPacket(int i, byte[] buf, int o, byte kind, String where) {
    int p = MessageRecords.data(o);
    String why = PacketFields.check(buf, p, MessageRecords.dataSize(buf, o));
    if (why != null) {
      throw new RecordingFormatException(where + ", message " + i + ": corrupt a0py packet"
          + (kind == FrameRows.JOINED ? " in its headers message: " : ": ") + why);
    }
    packet.read(buf, p);
    long seq = packet.seq >= 0 ? packet.seq : MessageRecords.sequence(buf, o);
    if (predicate.hasSeqBound() && !predicate.seqOk(seq)) {
      return;
    }
    if (kind == FrameRows.JOINED) {
      rows.add(i, seq, packet.mono, kind, buf, o);
    } else {
      rows.add(i, seq, packet.mono, kind, null, 0);
    }
  }

  private static long hdrKey(int headersId, long sequence) {
    return ((long) headersId << 32) | sequence;
  }

  /** Indexes the headers messages among msgs of recs by (headers channel, sequence); the first of a key wins. */
  private void indexHeaders(byte[] recs, Offsets msgs, HashMap<Long, Integer> into) {
    for (int i = 0; i < msgs.count; i++) {
      int o = msgs.at[i];
      int cid = MessageRecords.channelId(recs, o);
      RowChannel ch = channel(cid);
      if (ch != null && ch.kind == A0Scan.KIND_HEADERS) {
        into.putIfAbsent(hdrKey(cid, MessageRecords.sequence(recs, o)), o);
      }
    }
  }

  /**
   * The headers message of key: in this chunk, else in the chunks near it (read once and kept
   * for the next chunk); found into foundHdrBuf and foundHdrOff.
   */
  private boolean findHeaders(String path, byte[] recs, long key, McapLayout.Ref[] near) {
    if (ownHeaders == null) {
      ownHeaders = new HashMap<>();
      indexHeaders(recs, msgs, ownHeaders);
    }
    Integer ho = ownHeaders.get(key);
    if (ho != null) {
      return found(recs, ho, key, path);
    }
    if (near == null) {
      return false;
    }
    loadedNear = true;
    for (McapLayout.Ref c : near) {
      Companion comp = companion(path, c);
      ho = comp.index.get(key);
      if (ho != null) {
        return found(comp.recs, ho, key, path);
      }
    }
    return false;
  }

  /**
   * The headers message at recs[o] into foundHdrBuf and foundHdrOff: as it is (a0py packets), or
   * turned into a message record of the cut packet it holds (HeadersMessage), appended to cutRecs.
   */
  private boolean found(byte[] recs, int o, long key, String path) {
    RowChannel ch = channel((int) (key >>> 32));
    byte fmt = ch.headersFormat;
    if (fmt == HeadersMessage.PACKET) {
      foundHdrBuf = recs;
      foundHdrOff = o;
      return true;
    }
    String where = path + ": headers channel " + ch.topic + ", sequence " + MessageRecords.sequence(recs, o);
    if (fmt < 0) {
      throw new RecordingFormatException(where + ": a message encoding a0py does not write there");
    }
    int m = MessageRecords.data(o);
    long block = HeadersMessage.block(recs, m, MessageRecords.dataSize(recs, o), fmt, where);
    int cut = HeadersMessage.cutSize(recs, m, fmt, block);
    int need = McapRecords.Message.DATA + cut;
    if (cutRecs.length - cutUsed < need) {
      cutRecs = new byte[Math.max(1 << 16, 2 * need)];
      cutUsed = 0;
    }
    System.arraycopy(recs, o, cutRecs, cutUsed, McapRecords.Message.DATA);
    long length = McapRecords.Message.DATA - McapRecords.RECORD_HEADER + cut;
    for (int i = 0; i < 8; i++) {
      cutRecs[cutUsed + McapRecords.RECORD_LENGTH + i] = (byte) (length >>> (8 * i));
    }
    HeadersMessage.writeCut(recs, m, fmt, block, cutRecs, cutUsed + McapRecords.Message.DATA, where);
    foundHdrBuf = cutRecs;
    foundHdrOff = cutUsed;
    cutUsed += need;
    return true;
  }

  private Companion companion(String path, McapLayout.Ref ref) {
    Companion c = companions.get(ref.offset);
    if (c == null) {
      byte[] recs = McapChunk.records(file, ref, path, read.validateCrc);
      bytesRead += ref.length;
      chunksRead++;
      c = new Companion(recs);
      Offsets its = new Offsets();
      walk(recs, recs.length, path, ref, path + ": chunk at byte " + ref.offset, its);
      indexHeaders(recs, its, c.index);
      companions.put(ref.offset, c);
    }
    return c;
  }
}
