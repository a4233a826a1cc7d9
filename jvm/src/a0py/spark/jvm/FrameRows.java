package a0py.spark.jvm;

import java.util.Arrays;

/**
 * The frame rows kept from one chunk's messages, in message order: which
 * message, its seq and time_mono, its kind, and a joined row's headers
 * message (its records and the offset of its Message record).
 */
final class FrameRows {
  /** A message of whole a0py packets. */
  static final byte PACKET = 1;
  /** A typed topic's payload, joined with its headers message. */
  static final byte JOINED = 2;
  /** A message as recorded (a foreign channel, or a typed one whose headers message is missing). */
  static final byte RAW = 3;

  int count;
  int[] msg = new int[1024]; // index in the chunk's message offsets
  long[] seq = new long[1024]; // -1 for a RAW row (null)
  long[] mono = new long[1024]; // Long.MIN_VALUE: null
  byte[] kind = new byte[1024];
  byte[][] hdrBuf = new byte[1024][];
  int[] hdrOff = new int[1024];

  void clear() {
    count = 0;
  }

  void add(int i, long rowSeq, long rowMono, byte rowKind, byte[] rowHdrBuf, int rowHdrOff) {
    if (count == msg.length) {
      msg = Arrays.copyOf(msg, 2 * count);
      seq = Arrays.copyOf(seq, 2 * count);
      mono = Arrays.copyOf(mono, 2 * count);
      kind = Arrays.copyOf(kind, 2 * count);
      hdrBuf = Arrays.copyOf(hdrBuf, 2 * count);
      hdrOff = Arrays.copyOf(hdrOff, 2 * count);
    }
    msg[count] = i;
    seq[count] = rowSeq;
    mono[count] = rowMono;
    kind[count] = rowKind;
    if (rowKind == JOINED) { // read for JOINED rows only: no reference stored (nor its GC barrier) for the others
      hdrBuf[count] = rowHdrBuf;
      hdrOff[count] = rowHdrOff;
    }
    count++;
  }
}
