package a0py.spark.jvm;

import static a0py.spark.jvm.LittleEndian.le32;
import static a0py.spark.jvm.LittleEndian.le64;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;

/**
 * The headers column (a map of strings) of a batch, written from checked
 * a0py packets as a0py's readers show them: the standard block's five
 * entries first, rendered as decimals and the writer id as a UUID, then the
 * packet's own entries, in order. Bytes written once a batch (the standard
 * keys, a writer id repeated from row to row) are pointed at by later rows.
 */
final class HeadersColumn {
  private static final int STD_COUNT = PacketFields.STD_KEYS.length;
  // The standard keys one after another: each batch holds them once, and
  // every row's standard entries point at them.
  private static final byte[] STD_KEY_BYTES;
  private static final int[] STD_KEY_AT = new int[STD_COUNT];
  /** A UUID's bytes, and the length of its text (8-4-4-4-12 hex digits). */
  private static final int UUID_BYTES = 16;
  private static final int UUID_TEXT = 36;
  private static final byte[] HEX = "0123456789abcdef".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] DIGIT_PAIRS = new byte[200];
  private static final long[] POW10 = new long[19];

  static {
    int n = 0;
    for (int k = 0; k < STD_COUNT; k++) {
      STD_KEY_AT[k] = n;
      n += PacketFields.STD_KEYS[k].length;
    }
    STD_KEY_BYTES = new byte[n];
    for (int k = 0; k < STD_COUNT; k++) {
      System.arraycopy(PacketFields.STD_KEYS[k], 0, STD_KEY_BYTES, STD_KEY_AT[k], PacketFields.STD_KEYS[k].length);
    }
    for (int i = 0; i < 100; i++) {
      DIGIT_PAIRS[2 * i] = (byte) ('0' + i / 10);
      DIGIT_PAIRS[2 * i + 1] = (byte) ('0' + i % 10);
    }
    POW10[0] = 1;
    for (int i = 1; i < POW10.length; i++) {
      POW10[i] = POW10[i - 1] * 10;
    }
  }

  private final byte[] scratch = new byte[128];
  // Per batch: where bytes written once sit in the string columns' byte
  // buffers, for later rows to point at (-1: not yet in this batch).
  private int stdKeysAt = -1;
  private int writerIdAt = -1;
  private long writerIdHi;
  private long writerIdLo;

  /** A new batch: nothing written yet to point at. */
  void newBatch() {
    stdKeysAt = -1;
    writerIdAt = -1;
  }

  /**
   * Row {@code row}'s headers map from the packet at b[p]: the standard block's five entries
   * (keys pointing at the batch's one copy of the standard keys, values rendered together and
   * appended in one copy, a writer id repeated from the row before pointing at its first
   * rendering), then the packet's own entries, each checked to be UTF-8. The packet passed
   * {@link PacketFields#check}: every index entry and string lies inside it.
   */
  void put(OnHeapColumnVector map, int row, byte[] b, int p, String where, int msg) {
    WritableColumnVector keys = map.getChild(0);
    WritableColumnVector values = map.getChild(1);
    int start = keys.getElementsAppended();
    int n = 0;
    if (PacketFields.hasStd(b, p)) {
      putStandard(keys, values, start, b, p);
      n = STD_COUNT;
    }
    int count = PacketFields.headerCount(b, p);
    for (int j = 0; j < count; j++) {
      int e = PacketFields.entry(p, j);
      int ko = p + (int) le32(b, e + PacketLayout.ENTRY_KEY_OFF);
      int kl = (int) le32(b, e + PacketLayout.ENTRY_KEY_LEN);
      int vo = p + (int) le32(b, e + PacketLayout.ENTRY_VAL_OFF);
      int vl = (int) le32(b, e + PacketLayout.ENTRY_VAL_LEN);
      checkUtf8(b, ko, kl, where, msg, n + j, "key");
      checkUtf8(b, vo, vl, where, msg, n + j, "value");
      keys.appendByteArray(b, ko, kl);
      values.appendByteArray(b, vo, vl);
    }
    map.putArray(row, start, n + count);
  }

  /** The standard block's entries at keys and values [start, start + 5). */
  private void putStandard(WritableColumnVector keys, WritableColumnVector values, int start, byte[] b, int p) {
    keys.reserve(start + STD_COUNT);
    values.reserve(start + STD_COUNT);
    if (stdKeysAt < 0) {
      stdKeysAt = keys.arrayData().appendBytes(STD_KEY_BYTES.length, STD_KEY_BYTES, 0);
    }
    for (int k = 0; k < STD_COUNT; k++) {
      keys.putArray(start + k, stdKeysAt + STD_KEY_AT[k], PacketFields.STD_KEYS[k].length);
    }
    // scratch: time_mono, time_wall, writer_seq, transport_seq, then (when
    // new in this batch) the writer id as a UUID
    int e0 = putDec(0, le64(b, p + PacketLayout.TIME_MONO_OFF));
    int e1 = putDec(e0, le64(b, p + PacketLayout.TIME_WALL_OFF));
    int e3 = putDec(e1, le64(b, p + PacketLayout.WRITER_SEQ_OFF));
    int e4 = putDec(e3, le64(b, p + PacketLayout.TRANSPORT_SEQ_OFF));
    int id = p + PacketLayout.WRITER_ID_OFF;
    long hi = le64(b, id);
    long lo = le64(b, id + Long.BYTES);
    boolean newId = writerIdAt < 0 || hi != writerIdHi || lo != writerIdLo;
    int end = newId ? putUuid(e4, b, id) : e4;
    int at = values.arrayData().appendBytes(end, scratch, 0);
    if (newId) {
      writerIdAt = at + e4;
      writerIdHi = hi;
      writerIdLo = lo;
    }
    values.putArray(start + PacketFields.STD_TIME_MONO, at, e0);
    values.putArray(start + PacketFields.STD_TIME_WALL, at + e0, e1 - e0);
    values.putArray(start + PacketFields.STD_WRITER_ID, writerIdAt, UUID_TEXT);
    values.putArray(start + PacketFields.STD_WRITER_SEQ, at + e1, e3 - e1);
    values.putArray(start + PacketFields.STD_TRANSPORT_SEQ, at + e3, e4 - e3);
    keys.addElementsAppended(STD_COUNT);
    values.addElementsAppended(STD_COUNT);
  }

  /** Writes the 16 bytes at b[id] as a UUID into scratch at {@code at}; returns where it ends. */
  private int putUuid(int at, byte[] b, int id) {
    int end = at;
    for (int i = 0; i < UUID_BYTES; i++) {
      if (i == 4 || i == 6 || i == 8 || i == 10) {
        scratch[end++] = '-';
      }
      int x = b[id + i] & 0xff;
      scratch[end++] = HEX[x >> 4];
      scratch[end++] = HEX[x & 15];
    }
    return end;
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
