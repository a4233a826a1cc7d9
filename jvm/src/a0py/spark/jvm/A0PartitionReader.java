package a0py.spark.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Reads one partition: each chunk decompressed, its message records walked,
 * the a0py packets checked and decoded straight into Spark's column vectors
 * (one columnar batch a chunk: its frame rows, then its gap rows).
 *
 * <p>The rows are the Python source's (a0py/spark/batches.py invariants): seq is
 * the packet's a0_transport_seq (the record's 32-bit sequence when it has
 * none), time_mono its a0_time_mono, time_wall the record's publish time in
 * µs, headers the standard ones first, rendered as a0py's readers show them,
 * then the packet's own, in order. The packet checks are the C decoder's
 * (a0py/recording/_bulk.pyx): nothing is read outside the packet, every index
 * entry and string is checked before it is followed, and the first packet
 * that fails is an error naming the file, chunk and message. Only columns
 * the query asks for are filled. With decode=true (ROS 2 channels, planned by
 * RosDecode) each foreign message is decoded by its channel's CdrDecoder into
 * the message column, or its error into decode_error.
 */
final class A0PartitionReader implements PartitionReader<ColumnarBatch> {
  static final class Factory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    private final ReadOptions read;
    private final Predicate predicate;
    private final StructType schema;

    Factory(ReadOptions read, Predicate predicate, StructType schema) {
      this.read = read;
      this.predicate = predicate;
      this.schema = schema;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      throw new UnsupportedOperationException("the a0 JVM reader is columnar");
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
      return new A0PartitionReader((A0Scan.Partition) partition, read, predicate, schema);
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
      return true;
    }
  }

  private static final int PACKET_MAGIC = 0x4B503041;
  private static final int INDEX_OFF = 96;
  private static final byte[][] STD_KEYS = {
    bytes("a0_time_mono"), bytes("a0_time_wall"), bytes("a0_writer_id"), bytes("a0_writer_seq"),
    bytes("a0_transport_seq")};
  // The five standard keys one after another: each batch holds them once, and
  // every row's standard entries point at them.
  private static final byte[] STD_KEY_BYTES = bytes("a0_time_monoa0_time_walla0_writer_ida0_writer_seq"
      + "a0_transport_seq");
  private static final int[] STD_KEY_AT = {0, 12, 24, 36, 49};
  private static final byte[] K_SEQ = STD_KEYS[4];
  private static final byte[] K_MONO = STD_KEYS[0];
  private static final byte[] HEX = bytes("0123456789abcdef");
  private static final byte[] DIGIT_PAIRS = new byte[200];
  private static final long[] POW10 = new long[19];

  static {
    for (int i = 0; i < 100; i++) {
      DIGIT_PAIRS[2 * i] = (byte) ('0' + i / 10);
      DIGIT_PAIRS[2 * i + 1] = (byte) ('0' + i % 10);
    }
    POW10[0] = 1;
    for (int i = 1; i < POW10.length; i++) {
      POW10[i] = POW10[i - 1] * 10;
    }
  }
  private static final ObjectMapper JSON = new ObjectMapper();

  private final A0Scan.Partition part;
  private final ReadOptions read;
  private final Predicate predicate;
  private final OnHeapColumnVector[] vectors;
  private final ColumnarBatch batch;
  private final int cTopic;
  private final int cSeq;
  private final int cMono;
  private final int cWall;
  private final int cHeaders;
  private final int cPayload;
  private final int cIsGap;
  private final int cGapFirst;
  private final int cGapLast;
  private final int cRecord;
  private final int cLog;
  private final int cPub;
  private final int cSequence;
  private final int cSchema;
  private final int cEncoding;
  private final int cMessage;
  private final int cDecodeError;
  private final StructType messageType; // decode=true: the message type the query asks for (maybe pruned)
  private final Map<Integer, CdrDecoder> decoders = new HashMap<>(); // by channel id, for the current slice

  private int sliceIndex;
  private int refIndex;
  private FileChannel file;
  private final Map<Integer, Chan> channels = new HashMap<>();
  private final Map<Long, Companion> companions = new java.util.LinkedHashMap<>(8, 0.75f, true) {
    private static final long serialVersionUID = 1L;

    @Override
    protected boolean removeEldestEntry(Map.Entry<Long, Companion> e) {
      return size() > 2 * A0Scan.COMPANIONS;
    }
  };
  private final byte[] scratch = new byte[128];
  // Per batch: where bytes written once sit in the string columns' byte
  // buffers, for later rows to point at (-1: not yet in this batch).
  private int stdKeysAt;
  private int writerIdAt;
  private long writerIdHi;
  private long writerIdLo;
  private int batchStamp;
  private int[] topicStamp; // by channel id: the batch that holds its topic's bytes
  private int[] topicAt;
  private long bytesRead;
  private long chunksRead;

  // The kept rows of the current chunk.
  private int rows;
  private int[] rowMsg = new int[1024]; // record offset in the chunk
  private long[] rowSeq = new long[1024];
  private long[] rowMono = new long[1024]; // Long.MIN_VALUE: null
  private byte[] rowKind = new byte[1024]; // ROW_*
  private byte[][] rowHdrBuf = new byte[1024][]; // a joined row's headers message: its buffer and offset
  private int[] rowHdrOff = new int[1024];
  // The packet read by packetSeqMono.
  private long pktSeq;
  private long pktMono;

  private static final byte ROW_PACKET = 1;
  private static final byte ROW_JOINED = 2;
  private static final byte ROW_RAW = 3;
  private static final byte[] PACKET_SCHEMA = bytes(A0Scan.PACKET_SCHEMA);
  private static final byte[] PACKET_ENCODING = bytes(A0Scan.PACKET_ENCODING);

  /** A channel as the reader needs it. */
  private static final class Chan {
    final byte[] topicBytes;
    final String topic;
    final byte kind;
    final byte[] schemaName; // null: no schema
    final byte[] encoding;
    final int headersId; // a typed channel's headers channel, else -1

    Chan(String topic, byte kind, String schemaName, String encoding, int headersId) {
      this.topicBytes = bytes(topic);
      this.topic = topic;
      this.kind = kind;
      this.schemaName = schemaName == null ? null : bytes(schemaName);
      this.encoding = bytes(encoding);
      this.headersId = headersId;
    }
  }

  /** A chunk read for the headers messages it holds: (headers channel, sequence) -> record offset. */
  private static final class Companion {
    final byte[] recs;
    final HashMap<Long, Integer> index = new HashMap<>();

    Companion(byte[] recs) {
      this.recs = recs;
    }
  }

  A0PartitionReader(A0Scan.Partition part, ReadOptions read, Predicate predicate, StructType schema) {
    this.part = part;
    this.read = read;
    this.predicate = predicate;
    this.vectors = OnHeapColumnVector.allocateColumns(4096, schema);
    this.batch = new ColumnarBatch(vectors);
    cTopic = index(schema, "topic");
    cSeq = index(schema, "seq");
    cMono = index(schema, "time_mono");
    cWall = index(schema, "time_wall");
    cHeaders = index(schema, "headers");
    cPayload = index(schema, "payload");
    cIsGap = index(schema, "is_gap");
    cGapFirst = index(schema, "gap_first");
    cGapLast = index(schema, "gap_last");
    cRecord = index(schema, "time_record");
    cLog = index(schema, "log_time");
    cPub = index(schema, "publish_time");
    cSequence = index(schema, "sequence");
    cSchema = index(schema, "schema_name");
    cEncoding = index(schema, "message_encoding");
    cMessage = index(schema, "message");
    cDecodeError = index(schema, "decode_error");
    messageType = cMessage >= 0 ? (StructType) schema.fields()[cMessage].dataType() : null;
  }

  private static int index(StructType schema, String name) {
    String[] names = schema.fieldNames();
    for (int i = 0; i < names.length; i++) {
      if (names[i].equals(name)) {
        return i;
      }
    }
    return -1;
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Override
  public boolean next() throws IOException {
    while (sliceIndex < part.slices.size()) {
      A0Scan.Slice slice = part.slices.get(sliceIndex);
      if (file == null) {
        file = McapLayout.open(slice.path);
        channels.clear();
        companions.clear();
        decoders.clear();
        for (int i = 0; i < slice.channelIds.length; i++) {
          channels.put(slice.channelIds[i], new Chan(slice.topics[i], slice.kinds[i], slice.schemaNames[i],
              slice.encodings[i], slice.headerIds[i]));
          if ((cMessage >= 0 || cDecodeError >= 0) && slice.decodeSchemas != null
              && slice.decodeSchemas[i] != null) {
            decoders.put(slice.channelIds[i], decoder(slice.schemaNames[i], slice.decodeSchemas[i]));
          }
        }
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
    return false;
  }

  private final Map<String, CdrDecoder> decoderCache = new HashMap<>();

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
      StructType want = messageType != null ? messageType : CdrDecoder.sparkType(types);
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
    return batch;
  }

  @Override
  public void close() throws IOException {
    if (file != null) {
      file.close();
      file = null;
    }
    batch.close();
  }

  /** The records of a chunk: the offset of each message record, each checked to hold a message's fixed fields. */
  private int[] walk(byte[] recs, String path, McapLayout.Ref ref, String where, boolean learnChannels) {
    int n = recs.length;
    int[] msgs = new int[256];
    int count = 0;
    int pos = 0;
    while (pos < n) {
      if (pos + McapLayout.RECORD_HEADER > n) {
        throw McapLayout.fail(path, ref.offset, "chunk records: partial record header at " + pos + " of " + n);
      }
      int op = recs[pos] & 0xff;
      long ln = McapLayout.le64(recs, pos + 1);
      if (ln < 0 || ln > n - pos - McapLayout.RECORD_HEADER) {
        throw McapLayout.fail(path, ref.offset, "chunk records: record of opcode 0x" + Integer.toHexString(op)
            + " at " + pos + " claims " + Long.toUnsignedString(ln) + " bytes, "
            + (n - pos - McapLayout.RECORD_HEADER) + " left");
      }
      int end = pos + McapLayout.RECORD_HEADER + (int) ln;
      if (op == McapLayout.OP_MESSAGE) {
        if (ln < McapLayout.MESSAGE_FIXED - McapLayout.RECORD_HEADER) {
          throw new RecordingFormatException(where + ": message " + count + ": record of " + ln
              + " bytes, shorter than a message's fixed fields");
        }
        if (count == msgs.length) {
          msgs = Arrays.copyOf(msgs, 2 * count);
        }
        msgs[count++] = pos;
      } else if (op == McapLayout.OP_CHANNEL && learnChannels) {
        McapLayout.Channel ch = McapLayout.parseChannel(recs, pos + McapLayout.RECORD_HEADER, end, path, ref.offset);
        byte kind = A0Scan.kindOf(ch);
        if (kind != 0 && !channels.containsKey(ch.id)) {
          // A channel the plan did not know (its record only inside this chunk): no schema name to give.
          channels.put(ch.id, new Chan(A0Scan.rowTopic(ch, kind), kind, null, ch.encoding, headersIdOf(ch, kind)));
        }
      }
      pos = end;
    }
    return Arrays.copyOf(msgs, count);
  }

  private int headersIdOf(McapLayout.Channel ch, byte kind) {
    if (kind != A0Scan.KIND_TYPED) {
      return -1;
    }
    String t = ch.metadata.get(A0Scan.HEADERS_KEY);
    for (Map.Entry<Integer, Chan> e : channels.entrySet()) {
      if (e.getValue().kind == A0Scan.KIND_HEADERS && e.getValue().topic.equals(t)) {
        return e.getKey();
      }
    }
    return -1;
  }

  private static long hdrKey(int headersId, long sequence) {
    return ((long) headersId << 32) | sequence;
  }

  /** Indexes the headers messages among msgs of recs by (headers channel, sequence); the first of a key wins. */
  private void indexHeaders(byte[] recs, int[] msgs, HashMap<Long, Integer> into) {
    for (int o : msgs) {
      int cid = McapLayout.le16(recs, o + 9);
      Chan ch = channels.get(cid);
      if (ch != null && ch.kind == A0Scan.KIND_HEADERS) {
        into.putIfAbsent(hdrKey(cid, McapLayout.le32(recs, o + 11)), o);
      }
    }
  }

  private Companion companion(String path, McapLayout.Ref ref) {
    Companion c = companions.get(ref.offset);
    if (c == null) {
      byte[] recs = McapLayout.chunkRecords(file, ref, path, read.validateCrc);
      bytesRead += ref.length;
      chunksRead++;
      c = new Companion(recs);
      int[] msgs = walk(recs, path, ref, path + ": chunk at byte " + ref.offset, true);
      indexHeaders(recs, msgs, c.index);
      companions.put(ref.offset, c);
    }
    return c;
  }

  /** seq and time_mono of the checked packet at p into pktSeq (-1: none) and pktMono (MIN_VALUE: null). */
  private void packetSeqMono(byte[] recs, int p) {
    long seq = -1;
    long mono = Long.MIN_VALUE;
    if ((McapLayout.le16(recs, p + 6) & 1) != 0) {
      seq = McapLayout.le64(recs, p + 88);
      long m = McapLayout.le64(recs, p + 48);
      mono = m >= 0 ? m : Long.MIN_VALUE;
    } else {
      long entries = McapLayout.le32(recs, p + 24);
      boolean gotSeq = false;
      boolean gotMono = false;
      for (int j = 0; j < entries && !(gotSeq && gotMono); j++) {
        int e = p + INDEX_OFF + 16 * j;
        long kl = McapLayout.le32(recs, e + 4);
        int ko = p + (int) McapLayout.le32(recs, e);
        int vo = p + (int) McapLayout.le32(recs, e + 8);
        long vl = McapLayout.le32(recs, e + 12);
        if (kl == 16 && !gotSeq && Arrays.equals(recs, ko, ko + 16, K_SEQ, 0, 16)) {
          gotSeq = true;
          seq = parseDec(recs, vo, vl);
        } else if (kl == 12 && !gotMono && Arrays.equals(recs, ko, ko + 12, K_MONO, 0, 12)) {
          gotMono = true;
          long m = parseDec(recs, vo, vl);
          mono = m >= 0 ? m : Long.MIN_VALUE;
        }
      }
    }
    pktSeq = seq;
    pktMono = mono;
  }

  private static int dataSize(byte[] recs, int o) {
    return (int) McapLayout.le64(recs, o + 1) - (McapLayout.MESSAGE_FIXED - McapLayout.RECORD_HEADER);
  }

  private void keep(int i, long seq, long mono, byte kind, byte[] hdrBuf, int hdrOff) {
    if (rows == rowMsg.length) {
      rowMsg = Arrays.copyOf(rowMsg, 2 * rows);
      rowSeq = Arrays.copyOf(rowSeq, 2 * rows);
      rowMono = Arrays.copyOf(rowMono, 2 * rows);
      rowKind = Arrays.copyOf(rowKind, 2 * rows);
      rowHdrBuf = Arrays.copyOf(rowHdrBuf, 2 * rows);
      rowHdrOff = Arrays.copyOf(rowHdrOff, 2 * rows);
    }
    rowMsg[rows] = i;
    rowSeq[rows] = seq;
    rowMono[rows] = mono;
    rowKind[rows] = kind;
    rowHdrBuf[rows] = hdrBuf;
    rowHdrOff[rows] = hdrOff;
    rows++;
  }

  /** Decodes one chunk into the batch; returns its row count. */
  private int readChunk(String path, McapLayout.Ref ref, McapLayout.Ref[] near) {
    byte[] recs = McapLayout.chunkRecords(file, ref, path, read.validateCrc);
    bytesRead += ref.length;
    chunksRead++;
    String where = path + ": " + (ref.region ? "message region" : "chunk") + " at byte " + ref.offset;
    int[] msgs = walk(recs, path, ref, where, true);
    int count = msgs.length;
    HashMap<Long, Integer> own = null; // this chunk's headers messages, indexed when it holds typed ones
    boolean loadedNear = false;
    rows = 0;
    int gaps = 0;
    int[] gapMsgs = null;
    for (int i = 0; i < count; i++) {
      int o = msgs[i];
      int cid = McapLayout.le16(recs, o + 9);
      Chan ch = channels.get(cid);
      if (ch == null || ch.kind == A0Scan.KIND_HEADERS) {
        continue;
      }
      byte kind = ch.kind;
      if (kind == A0Scan.KIND_GAP) {
        if (read.gaps) {
          if (gapMsgs == null) {
            gapMsgs = new int[16];
          } else if (gaps == gapMsgs.length) {
            gapMsgs = Arrays.copyOf(gapMsgs, 2 * gaps);
          }
          gapMsgs[gaps++] = o;
        }
        continue;
      }
      if (!predicate.topicOk(ch.topic) || !predicate.logOk(logUs(recs, o))) {
        continue;
      }
      if (kind == A0Scan.KIND_PACKET) {
        if (!predicate.wallOk(wallUs(recs, o))) {
          continue;
        }
        int p = o + McapLayout.MESSAGE_FIXED;
        String why = check(recs, p, dataSize(recs, o));
        if (why != null) {
          throw new RecordingFormatException(where + ", message " + i + ": corrupt a0py packet: " + why);
        }
        packetSeqMono(recs, p);
        long seq = pktSeq >= 0 ? pktSeq : McapLayout.le32(recs, o + 11);
        if (predicate.hasSeqBound() && !predicate.seqOk(seq)) {
          continue;
        }
        keep(i, seq, pktMono, ROW_PACKET, null, 0);
        continue;
      }
      if (kind == A0Scan.KIND_TYPED && ch.headersId >= 0) {
        long key = hdrKey(ch.headersId, McapLayout.le32(recs, o + 11));
        byte[] hb = null;
        Integer ho = null;
        if (own == null) {
          own = new HashMap<>();
          indexHeaders(recs, msgs, own);
        }
        ho = own.get(key);
        if (ho != null) {
          hb = recs;
        } else if (near != null) {
          for (McapLayout.Ref c : near) {
            Companion comp = companion(path, c);
            ho = comp.index.get(key);
            if (ho != null) {
              hb = comp.recs;
              break;
            }
          }
          loadedNear = true;
        }
        if (hb != null) {
          if (!predicate.wallOk(wallUs(hb, ho))) {
            continue;
          }
          int hp = ho + McapLayout.MESSAGE_FIXED;
          String why = check(hb, hp, dataSize(hb, ho));
          if (why != null) {
            throw new RecordingFormatException(where + ", message " + i + ": corrupt a0py packet in its headers "
                + "message: " + why);
          }
          packetSeqMono(hb, hp);
          long seq = pktSeq >= 0 ? pktSeq : McapLayout.le32(hb, ho + 11);
          if (predicate.hasSeqBound() && !predicate.seqOk(seq)) {
            continue;
          }
          keep(i, seq, pktMono, ROW_JOINED, hb, ho);
          continue;
        }
      }
      // A foreign message, or a typed one whose headers message is missing: the message as recorded.
      if (predicate.hasSeqBound() || !predicate.wallOk(wallUs(recs, o))) {
        continue; // its seq is NULL, which no seq filter passes
      }
      keep(i, -1, Long.MIN_VALUE, ROW_RAW, null, 0);
    }
    if (!loadedNear) {
      companions.clear(); // the chunks near this one were not needed: none kept for the next
    }
    int frames = rows;
    Object[][] gapRows = gaps > 0 ? gapRows(recs, gapMsgs, gaps, where) : new Object[0][];
    int total = frames + gapRows.length;
    for (OnHeapColumnVector v : vectors) {
      v.reset();
      v.reserve(Math.max(total, 1));
    }
    WritableColumnVector msgVec = cMessage >= 0 ? vectors[cMessage] : null;
    if (msgVec != null) {
      CdrDecoder.reserve(msgVec, Math.max(total, 1));
    }
    stdKeysAt = -1;
    writerIdAt = -1;
    batchStamp++;
    for (int r = 0; r < frames; r++) {
      int i = rowMsg[r];
      int o = msgs[i];
      int p = o + McapLayout.MESSAGE_FIXED;
      int size = dataSize(recs, o);
      byte kind = rowKind[r];
      Chan ch = channels.get(McapLayout.le16(recs, o + 9));
      if (cTopic >= 0) {
        putTopic(vectors[cTopic], r, McapLayout.le16(recs, o + 9));
      }
      if (cSeq >= 0) {
        if (kind == ROW_RAW) {
          vectors[cSeq].putNull(r);
        } else {
          vectors[cSeq].putLong(r, rowSeq[r]);
        }
      }
      if (cMono >= 0) {
        if (rowMono[r] == Long.MIN_VALUE) {
          vectors[cMono].putNull(r);
        } else {
          vectors[cMono].putLong(r, rowMono[r]);
        }
      }
      if (cWall >= 0) {
        vectors[cWall].putLong(r, kind == ROW_JOINED ? wallUs(rowHdrBuf[r], rowHdrOff[r]) : wallUs(recs, o));
      }
      if (cHeaders >= 0) {
        if (kind == ROW_PACKET) {
          putHeaders(vectors[cHeaders], r, recs, p, where, i);
        } else if (kind == ROW_JOINED) {
          putHeaders(vectors[cHeaders], r, rowHdrBuf[r], rowHdrOff[r] + McapLayout.MESSAGE_FIXED,
              where + " (the headers message of payload message " + i + ")", i);
        } else {
          vectors[cHeaders].putNull(r);
        }
      }
      if (cPayload >= 0) {
        if (kind == ROW_PACKET) {
          int poff = (int) McapLayout.le64(recs, p + 32);
          vectors[cPayload].putByteArray(r, recs, p + poff, size - poff);
        } else {
          vectors[cPayload].putByteArray(r, recs, p, size);
        }
      }
      if (cLog >= 0) {
        vectors[cLog].putLong(r, capped(McapLayout.le64(recs, o + 15)) / 1000);
      }
      if (cPub >= 0) {
        vectors[cPub].putLong(r, wallUs(recs, o));
      }
      if (cSequence >= 0) {
        vectors[cSequence].putLong(r, McapLayout.le32(recs, o + 11));
      }
      if (cSchema >= 0) {
        byte[] sn = kind == ROW_PACKET ? PACKET_SCHEMA : ch.schemaName;
        if (sn == null) {
          vectors[cSchema].putNull(r);
        } else {
          vectors[cSchema].putByteArray(r, sn, 0, sn.length);
        }
      }
      if (cEncoding >= 0) {
        byte[] en = kind == ROW_PACKET ? PACKET_ENCODING : ch.encoding;
        vectors[cEncoding].putByteArray(r, en, 0, en.length);
      }
      if (cMessage >= 0 || cDecodeError >= 0) {
        CdrDecoder dec = kind == ROW_RAW ? decoders.get(McapLayout.le16(recs, o + 9)) : null;
        String err = dec == null ? null : dec.decode(recs, p, size, msgVec, r);
        if (msgVec != null && (dec == null || err != null)) {
          msgVec.putNull(r);
        }
        if (cDecodeError >= 0) {
          if (err == null) {
            vectors[cDecodeError].putNull(r);
          } else {
            byte[] eb = bytes(err);
            vectors[cDecodeError].putByteArray(r, eb, 0, eb.length);
          }
        }
      }
      if (cIsGap >= 0) {
        vectors[cIsGap].putBoolean(r, false);
      }
      if (cGapFirst >= 0) {
        vectors[cGapFirst].putNull(r);
      }
      if (cGapLast >= 0) {
        vectors[cGapLast].putNull(r);
      }
      if (cRecord >= 0) {
        vectors[cRecord].putLong(r, capped(McapLayout.le64(recs, o + 15)) / 1000);
      }
    }
    for (int g = 0; g < gapRows.length; g++) {
      int r = frames + g;
      Object[] gr = gapRows[g];
      int o = (Integer) gr[5];
      Chan ch = channels.get(McapLayout.le16(recs, o + 9));
      if (cTopic >= 0) {
        byte[] t = bytes((String) gr[0]);
        vectors[cTopic].putByteArray(r, t, 0, t.length);
      }
      if (cSeq >= 0) {
        vectors[cSeq].putLong(r, (Long) gr[1]);
      }
      if (cMono >= 0) {
        vectors[cMono].putNull(r);
      }
      if (cWall >= 0) {
        vectors[cWall].putLong(r, (Long) gr[3]);
      }
      if (cHeaders >= 0) {
        vectors[cHeaders].putNull(r);
      }
      if (cPayload >= 0) {
        vectors[cPayload].putNull(r);
      }
      if (cLog >= 0) {
        vectors[cLog].putLong(r, (Long) gr[4]);
      }
      if (cPub >= 0) {
        vectors[cPub].putLong(r, (Long) gr[3]);
      }
      if (cSequence >= 0) {
        vectors[cSequence].putLong(r, McapLayout.le32(recs, o + 11));
      }
      if (cSchema >= 0) {
        if (ch.schemaName == null) {
          vectors[cSchema].putNull(r);
        } else {
          vectors[cSchema].putByteArray(r, ch.schemaName, 0, ch.schemaName.length);
        }
      }
      if (cEncoding >= 0) {
        vectors[cEncoding].putByteArray(r, ch.encoding, 0, ch.encoding.length);
      }
      if (cMessage >= 0) {
        vectors[cMessage].putNull(r);
      }
      if (cDecodeError >= 0) {
        vectors[cDecodeError].putNull(r);
      }
      if (cIsGap >= 0) {
        vectors[cIsGap].putBoolean(r, true);
      }
      if (cGapFirst >= 0) {
        vectors[cGapFirst].putLong(r, (Long) gr[1]);
      }
      if (cGapLast >= 0) {
        vectors[cGapLast].putLong(r, (Long) gr[2]);
      }
      if (cRecord >= 0) {
        vectors[cRecord].putLong(r, (Long) gr[4]);
      }
    }
    batch.setNumRows(total);
    return total;
  }

  private static long capped(long u64) {
    return u64 < 0 ? Long.MAX_VALUE : u64;
  }

  private static long logUs(byte[] recs, int o) {
    return capped(McapLayout.le64(recs, o + 15)) / 1000;
  }

  private static long wallUs(byte[] recs, int o) {
    return capped(McapLayout.le64(recs, o + 23)) / 1000;
  }

  /** The gap rows (topic, first, last, wall µs, record µs, record offset) of the gap messages that pass. */
  private Object[][] gapRows(byte[] recs, int[] offs, int count, String where) {
    java.util.List<Object[]> out = new java.util.ArrayList<>();
    for (int i = 0; i < count; i++) {
      int o = offs[i];
      int ln = (int) McapLayout.le64(recs, o + 1);
      String topic;
      long first;
      long last;
      try {
        JsonNode g = JSON.readTree(recs, o + McapLayout.MESSAGE_FIXED,
            McapLayout.RECORD_HEADER + ln - McapLayout.MESSAGE_FIXED);
        if (g == null || !g.isObject() || !g.has("topic") || !g.has("first") || !g.has("last")) {
          throw new IOException("not an object with topic, first and last");
        }
        topic = g.get("topic").asText();
        first = integer(g.get("first"));
        last = integer(g.get("last"));
      } catch (IOException | RuntimeException e) {
        throw new RecordingFormatException(where + ", gap message " + i + ": not a gap record (" + e.getMessage()
            + ")");
      }
      long wall = wallUs(recs, o);
      if (predicate.topicOk(topic) && predicate.seqOk(first) && predicate.wallOk(wall)
          && predicate.logOk(logUs(recs, o))) {
        out.add(new Object[] {topic, first, last, wall, capped(McapLayout.le64(recs, o + 15)) / 1000, o});
      }
    }
    return out.toArray(new Object[0][]);
  }

  private static long integer(JsonNode n) throws IOException {
    if (n.isIntegralNumber() && n.canConvertToLong()) {
      return n.longValue();
    }
    if (n.isTextual()) {
      try {
        return Long.parseLong(n.asText().trim());
      } catch (NumberFormatException e) {
        throw new IOException("not an integer: " + n);
      }
    }
    throw new IOException("not an integer: " + n);
  }

  /** The C decoder's checks of the packet at p (size bytes): null when it passes, else why not. */
  static String check(byte[] b, int p, int size) {
    if (size < INDEX_OFF) {
      return "shorter than the 96 bytes of the fixed header and standard block";
    }
    if ((int) McapLayout.le32(b, p) != PACKET_MAGIC) {
      return "field magic";
    }
    if (McapLayout.le16(b, p + 4) != 1) {
      return "field version";
    }
    if ((McapLayout.le16(b, p + 6) & ~1) != 0) {
      return "field flags";
    }
    if (McapLayout.le32(b, p + 28) != 0) {
      return "field reserved";
    }
    long count = McapLayout.le32(b, p + 24);
    long poff = McapLayout.le64(b, p + 32);
    long psize = McapLayout.le64(b, p + 40);
    long indexEnd = INDEX_OFF + 16 * count;
    if (poff < indexEnd || poff % 16 != 0 || poff > size) {
      return "field payload_off";
    }
    if (psize != size - poff) {
      return "field payload_size";
    }
    for (int i = 0; i < count; i++) {
      int e = p + INDEX_OFF + 16 * i;
      long ko = McapLayout.le32(b, e);
      long kl = McapLayout.le32(b, e + 4);
      long vo = McapLayout.le32(b, e + 8);
      long vl = McapLayout.le32(b, e + 12);
      if (ko < indexEnd || ko + kl + 1 > poff || b[p + (int) (ko + kl)] != 0) {
        return "a header key outside the strings area or without its NUL";
      }
      if (vo < indexEnd || vo + vl + 1 > poff || b[p + (int) (vo + vl)] != 0) {
        return "a header value outside the strings area or without its NUL";
      }
    }
    return null;
  }

  /** A decimal of 1..19 digits below 2**63, or -1. */
  private static long parseDec(byte[] b, int off, long n) {
    if (n < 1 || n > 19) {
      return -1;
    }
    long v = 0;
    for (int i = 0; i < n; i++) {
      int c = b[off + i];
      if (c < '0' || c > '9') {
        return -1;
      }
      long next = v * 10 + (c - '0');
      if (next < 0 || (v > Long.MAX_VALUE / 10)) {
        return -1;
      }
      v = next;
    }
    return v;
  }

  /**
   * Row r's topic: the channel's topic bytes are copied into the column once a
   * batch, and each row of the channel points at them.
   */
  private void putTopic(OnHeapColumnVector v, int r, int channel) {
    if (topicStamp == null) {
      topicStamp = new int[1 << 16];
      topicAt = new int[1 << 16];
    }
    byte[] t = channels.get(channel).topicBytes;
    if (topicStamp[channel] != batchStamp) {
      topicAt[channel] = v.arrayData().appendBytes(t.length, t, 0);
      topicStamp[channel] = batchStamp;
    }
    v.putArray(r, topicAt[channel], t.length);
  }

  /** Writes the decimal of an unsigned 64-bit value into scratch at {@code at}; returns where it ends. */
  private int putDec(int at, long unsigned) {
    if (unsigned < 0) {
      String s = Long.toUnsignedString(unsigned);
      for (int i = 0; i < s.length(); i++) {
        scratch[at + i] = (byte) s.charAt(i);
      }
      return at + s.length();
    }
    // digits: log10 from the bit length (1233 / 4096 ~ log10(2)), corrected by one compare
    int n = ((64 - Long.numberOfLeadingZeros(unsigned)) * 1233 >>> 12) + 1;
    if (n < 19 && unsigned >= POW10[n]) {
      n++;
    } else if (n > 1 && unsigned < POW10[n - 1]) {
      n--;
    }
    int end = at + n;
    int i = end;
    long v = unsigned;
    while (v >= 100_000_000L) { // eight digits at a time in int arithmetic
      long q = v / 100_000_000L;
      int r = (int) (v - q * 100_000_000L);
      for (int k = 0; k < 4; k++) {
        int r2 = r / 100;
        int d = (r - r2 * 100) * 2;
        scratch[--i] = DIGIT_PAIRS[d + 1];
        scratch[--i] = DIGIT_PAIRS[d];
        r = r2;
      }
      v = q;
    }
    int r = (int) v;
    while (r >= 100) {
      int r2 = r / 100;
      int d = (r - r2 * 100) * 2;
      scratch[--i] = DIGIT_PAIRS[d + 1];
      scratch[--i] = DIGIT_PAIRS[d];
      r = r2;
    }
    if (r >= 10) {
      scratch[--i] = DIGIT_PAIRS[2 * r + 1];
      scratch[--i] = DIGIT_PAIRS[2 * r];
    } else {
      scratch[--i] = (byte) ('0' + r);
    }
    return end;
  }

  /**
   * Row {@code row}'s headers map: the standard block's five entries (keys
   * pointing at the batch's one copy of the standard keys, values rendered
   * together and appended in one copy, a writer id repeated from the row
   * before pointing at its first rendering), then the packet's own entries,
   * each checked to be UTF-8. The packet passed {@link #check}: every index
   * entry and string lies inside it.
   */
  private void putHeaders(OnHeapColumnVector map, int row, byte[] b, int p, String where, int msg) {
    WritableColumnVector keys = map.getChild(0);
    WritableColumnVector values = map.getChild(1);
    int start = keys.getElementsAppended();
    int count = (int) McapLayout.le32(b, p + 24);
    boolean std = (McapLayout.le16(b, p + 6) & 1) != 0;
    int n = 0;
    if (std) {
      keys.reserve(start + 5);
      values.reserve(start + 5);
      if (stdKeysAt < 0) {
        stdKeysAt = keys.arrayData().appendBytes(STD_KEY_BYTES.length, STD_KEY_BYTES, 0);
      }
      for (int k = 0; k < 5; k++) {
        keys.putArray(start + k, stdKeysAt + STD_KEY_AT[k], STD_KEYS[k].length);
      }
      // scratch: time_mono, time_wall, writer_seq, transport_seq, then (when
      // new in this batch) the writer id as a UUID
      int e0 = putDec(0, McapLayout.le64(b, p + 48));
      int e1 = putDec(e0, McapLayout.le64(b, p + 56));
      int e3 = putDec(e1, McapLayout.le64(b, p + 80));
      int e4 = putDec(e3, McapLayout.le64(b, p + 88));
      long hi = McapLayout.le64(b, p + 64);
      long lo = McapLayout.le64(b, p + 72);
      boolean newId = writerIdAt < 0 || hi != writerIdHi || lo != writerIdLo;
      int end = e4;
      if (newId) {
        for (int i = 0; i < 16; i++) {
          if (i == 4 || i == 6 || i == 8 || i == 10) {
            scratch[end++] = '-';
          }
          int x = b[p + 64 + i] & 0xff;
          scratch[end++] = HEX[x >> 4];
          scratch[end++] = HEX[x & 15];
        }
      }
      int at = values.arrayData().appendBytes(end, scratch, 0);
      if (newId) {
        writerIdAt = at + e4;
        writerIdHi = hi;
        writerIdLo = lo;
      }
      values.putArray(start, at, e0);
      values.putArray(start + 1, at + e0, e1 - e0);
      values.putArray(start + 2, writerIdAt, 36);
      values.putArray(start + 3, at + e1, e3 - e1);
      values.putArray(start + 4, at + e3, e4 - e3);
      keys.addElementsAppended(5);
      values.addElementsAppended(5);
      n = 5;
    }
    for (int j = 0; j < count; j++) {
      int e = p + INDEX_OFF + 16 * j;
      int ko = p + (int) McapLayout.le32(b, e);
      int kl = (int) McapLayout.le32(b, e + 4);
      int vo = p + (int) McapLayout.le32(b, e + 8);
      int vl = (int) McapLayout.le32(b, e + 12);
      checkUtf8(b, ko, kl, where, msg, n + j, "key");
      checkUtf8(b, vo, vl, where, msg, n + j, "value");
      keys.appendByteArray(b, ko, kl);
      values.appendByteArray(b, vo, vl);
    }
    map.putArray(row, start, n + count);
  }

  private static void checkUtf8(byte[] b, int off, int len, String where, int msg, int j, String what) {
    for (int i = off; i < off + len; i++) {
      if (b[i] < 0) {
        try {
          StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
              .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(b, off, len));
        } catch (CharacterCodingException e) {
          throw new RecordingFormatException(where + ", message " + msg + ": corrupt a0py packet: header " + j + " "
              + what + " is not UTF-8");
        }
        return;
      }
    }
  }
}
