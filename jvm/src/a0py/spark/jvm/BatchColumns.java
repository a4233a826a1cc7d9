package a0py.spark.jvm;

import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * The columnar batch of one chunk: Spark's column vectors for the columns
 * the query asks for (the others are never filled), written row by row,
 * the frame rows first, then the gap rows. The rows are the Python
 * source's (a0py/spark/batches.py): seq is the packet's a0_transport_seq
 * (the record's 32-bit sequence when it has none), time_mono its
 * a0_time_mono, time_wall the record's publish time in µs, headers as
 * {@link HeadersColumn} renders them.
 */
final class BatchColumns {
  private static final byte[] PACKET_SCHEMA = A0Scan.PACKET_SCHEMA.getBytes(StandardCharsets.UTF_8);
  private static final byte[] PACKET_ENCODING = A0Scan.PACKET_ENCODING.getBytes(StandardCharsets.UTF_8);

  final ColumnarBatch batch;
  private final OnHeapColumnVector[] vectors;
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
  /** decode=true: the message type the query asks for (maybe pruned), else null. */
  final StructType messageType;
  private final int[] nullInGapRows; // the frame-only columns the query asks for
  private final HeadersColumn headers = new HeadersColumn();
  /** The payload column (binary): slices of the chunk's records, or null when not asked for. */
  private final SliceColumn payload;
  private WritableColumnVector msgVec; // the message column of the current batch, or null
  // Per batch: a channel's topic bytes are copied into the column once, and each row points at them.
  private int batchStamp;
  private int[] topicStamp; // by channel id: the batch that holds its topic's bytes
  private int[] topicAt;

  BatchColumns(StructType schema) {
    this.vectors = OnHeapColumnVector.allocateColumns(4096, schema);
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
    nullInGapRows = java.util.stream.IntStream.of(cMono, cHeaders, cMessage, cDecodeError)
        .filter(c -> c >= 0).toArray();
    org.apache.spark.sql.vectorized.ColumnVector[] cols =
        java.util.Arrays.copyOf(vectors, vectors.length, org.apache.spark.sql.vectorized.ColumnVector[].class);
    if (cPayload >= 0) {
      if (!(schema.fields()[cPayload].dataType() instanceof org.apache.spark.sql.types.BinaryType)) {
        throw new IllegalStateException("the JVM reader's payload column is binary, not "
            + schema.fields()[cPayload].dataType().simpleString());
      }
      vectors[cPayload].close();
      vectors[cPayload] = null;
      payload = new SliceColumn();
      cols[cPayload] = payload;
    } else {
      payload = null;
    }
    this.batch = new ColumnarBatch(cols);
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

  /** Does the query ask for the decoded message or its error? */
  boolean decodes() {
    return cMessage >= 0 || cDecodeError >= 0;
  }

  /** Empties the batch for {@code total} rows of the chunk's records {@code recs}. */
  void reset(byte[] recs, int total) {
    for (OnHeapColumnVector v : vectors) {
      if (v != null) {
        v.reset();
        v.reserve(Math.max(total, 1));
      }
    }
    if (payload != null) {
      payload.reset(recs, total);
    }
    msgVec = cMessage >= 0 ? vectors[cMessage] : null;
    if (msgVec != null) {
      CdrDecoder.reserve(msgVec, Math.max(total, 1));
    }
    headers.newBatch();
    batchStamp++;
  }

  /**
   * Frame row r: message rows.msg[r] of the chunk, whose Message record is at recs[o], of
   * channel cid; dec decodes a RAW row's message (null: none asked for or none planned).
   */
  void putFrameRow(int r, FrameRows rows, byte[] recs, int o, int cid, RowChannel ch, CdrDecoder dec,
      String where) {
    int i = rows.msg[r];
    int p = MessageRecords.data(o);
    int size = MessageRecords.dataSize(recs, o);
    byte kind = rows.kind[r];
    if (cTopic >= 0) {
      putTopic(vectors[cTopic], r, cid, ch.topicBytes);
    }
    if (cSeq >= 0) {
      putLongOrNull(vectors[cSeq], r, kind != FrameRows.RAW, rows.seq[r]);
    }
    if (cMono >= 0) {
      putLongOrNull(vectors[cMono], r, rows.mono[r] != Long.MIN_VALUE, rows.mono[r]);
    }
    if (cWall >= 0) {
      vectors[cWall].putLong(r, kind == FrameRows.JOINED ? MessageRecords.wallUs(rows.hdrBuf[r], rows.hdrOff[r])
          : MessageRecords.wallUs(recs, o));
    }
    if (cHeaders >= 0) {
      if (kind == FrameRows.PACKET) {
        headers.put(vectors[cHeaders], r, recs, p, where, i);
      } else if (kind == FrameRows.JOINED) {
        headers.put(vectors[cHeaders], r, rows.hdrBuf[r], MessageRecords.data(rows.hdrOff[r]),
            where + " (the headers message of payload message " + i + ")", i);
      } else {
        vectors[cHeaders].putNull(r);
      }
    }
    if (payload != null) {
      if (kind == FrameRows.PACKET) {
        int poff = PacketFields.payloadOffset(recs, p);
        payload.put(r, p + poff, size - poff);
      } else {
        payload.put(r, p, size);
      }
    }
    if (cLog >= 0) {
      vectors[cLog].putLong(r, MessageRecords.logUs(recs, o));
    }
    if (cPub >= 0) {
      vectors[cPub].putLong(r, MessageRecords.wallUs(recs, o));
    }
    if (cSequence >= 0) {
      vectors[cSequence].putLong(r, MessageRecords.sequence(recs, o));
    }
    if (cSchema >= 0) {
      putBytesOrNull(vectors[cSchema], r, kind == FrameRows.PACKET ? PACKET_SCHEMA : ch.schemaName);
    }
    if (cEncoding >= 0) {
      byte[] en = kind == FrameRows.PACKET ? PACKET_ENCODING : ch.encoding;
      vectors[cEncoding].putByteArray(r, en, 0, en.length);
    }
    if (decodes()) {
      String err = dec == null ? null : dec.decode(recs, p, size, msgVec, r);
      if (msgVec != null && (dec == null || err != null)) {
        msgVec.putNull(r);
      }
      if (cDecodeError >= 0) {
        putBytesOrNull(vectors[cDecodeError], r, err == null ? null : err.getBytes(StandardCharsets.UTF_8));
      }
    }
    putGapColumns(r, null, cRecord >= 0 ? MessageRecords.logUs(recs, o) : 0);
  }

  /** Gap row r: gap g, whose Message record (in recs) is of channel ch. */
  void putGapRow(int r, GapRow g, byte[] recs, RowChannel ch) {
    if (cTopic >= 0) {
      byte[] t = g.topic().getBytes(StandardCharsets.UTF_8);
      vectors[cTopic].putByteArray(r, t, 0, t.length);
    }
    if (cSeq >= 0) {
      vectors[cSeq].putLong(r, g.first());
    }
    if (cWall >= 0) {
      vectors[cWall].putLong(r, g.wallUs());
    }
    if (cLog >= 0) {
      vectors[cLog].putLong(r, g.logUs());
    }
    if (cPub >= 0) {
      vectors[cPub].putLong(r, g.wallUs());
    }
    if (cSequence >= 0) {
      vectors[cSequence].putLong(r, MessageRecords.sequence(recs, g.recordOffset()));
    }
    if (cSchema >= 0) {
      putBytesOrNull(vectors[cSchema], r, ch.schemaName);
    }
    if (cEncoding >= 0) {
      vectors[cEncoding].putByteArray(r, ch.encoding, 0, ch.encoding.length);
    }
    putGapColumns(r, g, g.logUs());
    for (int c : nullInGapRows) {
      vectors[c].putNull(r);
    }
    if (payload != null) {
      payload.putNull(r);
    }
  }

  /** Row r's is_gap, gap_first, gap_last (g: its gap, null for a frame row) and time_record columns. */
  private void putGapColumns(int r, GapRow g, long recordUs) {
    if (cIsGap >= 0) {
      vectors[cIsGap].putBoolean(r, g != null);
    }
    if (cGapFirst >= 0) {
      putLongOrNull(vectors[cGapFirst], r, g != null, g != null ? g.first() : 0);
    }
    if (cGapLast >= 0) {
      putLongOrNull(vectors[cGapLast], r, g != null, g != null ? g.last() : 0);
    }
    if (cRecord >= 0) {
      vectors[cRecord].putLong(r, recordUs);
    }
  }

  private static void putLongOrNull(WritableColumnVector v, int r, boolean present, long value) {
    if (present) {
      v.putLong(r, value);
    } else {
      v.putNull(r);
    }
  }

  private static void putBytesOrNull(WritableColumnVector v, int r, byte[] b) {
    if (b == null) {
      v.putNull(r);
    } else {
      v.putByteArray(r, b, 0, b.length);
    }
  }

  /**
   * Row r's topic: the channel's topic bytes are copied into the column once a
   * batch, and each row of the channel points at them.
   */
  private void putTopic(OnHeapColumnVector v, int r, int channel, byte[] t) {
    if (topicStamp == null) {
      topicStamp = new int[1 << 16];
      topicAt = new int[1 << 16];
    }
    if (topicStamp[channel] != batchStamp) {
      topicAt[channel] = v.arrayData().appendBytes(t.length, t, 0);
      topicStamp[channel] = batchStamp;
    }
    v.putArray(r, topicAt[channel], t.length);
  }
}
