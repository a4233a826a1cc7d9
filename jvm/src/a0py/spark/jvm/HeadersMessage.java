package a0py.spark.jvm;

import static a0py.spark.jvm.LittleEndian.le32;

import java.util.Arrays;

/**
 * A typed topic's headers message in the family of its payloads (a0py/recording/headers.py has
 * the layouts and why): an {@code a0py.PacketHeaders} (protobuf) or an
 * {@code a0py_msgs/msg/PacketHeaders} (CDR), turned back into the packet cut at its payload that
 * the readers join (the bytes a headers channel of {@code a0py/packet} holds as they are). The
 * fields sit at fixed offsets in the messages a0py writes; every key, length and size is checked.
 * tests/spark/test_spark_jvm_headers.py holds these offsets to headers.py's.
 */
final class HeadersMessage {
  static final byte PACKET = 0;
  static final byte PROTOBUF = 1;
  static final byte CDR = 2;
  /** flags of a headers message whose frame was no packet: its header_block is the frame. */
  static final long NOT_A_PACKET = 0xFFFFFFFFL;

  /** Per field (flags, header_count, id, time_mono, time_wall, writer_id, writer_seq, transport_seq). */
  static final int[] SIZE = {4, 4, 16, 8, 8, 16, 8, 8};
  static final int[] PACKET_AT = {PacketLayout.FLAGS_OFF, PacketLayout.HEADER_COUNT_OFF, PacketLayout.ID_OFF,
      PacketLayout.TIME_MONO_OFF, PacketLayout.TIME_WALL_OFF, PacketLayout.WRITER_ID_OFF, PacketLayout.WRITER_SEQ_OFF,
      PacketLayout.TRANSPORT_SEQ_OFF};
  static final int[] PB_AT = {1, 6, 12, 29, 38, 48, 65, 74};
  static final int[] CDR_AT = {4, 8, 12, 28, 36, 44, 60, 68};
  /** Where header_block's key (protobuf: 0x4a, then a varint length) or uint32 length (CDR) sits. */
  static final int PB_BLOCK_KEY_AT = 82;
  static final int CDR_BLOCK_AT = 76;
  private static final byte PB_BLOCK_KEY = 0x4a;
  /** The keys before each protobuf field's value (a bytes field's key and its length 16). */
  private static final byte[][] PB_KEYS = {{0x0d}, {0x15}, {0x1a, 0x10}, {0x21}, {0x29}, {0x32, 0x10}, {0x39},
      {0x41}};

  private HeadersMessage() {}

  /** The format of a headers channel of message encoding {@code encoding}; -1 for one a0py does not write. */
  static byte format(String encoding) {
    switch (encoding) {
      case "a0py/packet":
        return PACKET;
      case "protobuf":
        return PROTOBUF;
      case "cdr":
        return CDR;
      default:
        return -1;
    }
  }

  /**
   * Checks the headers message at b[m, m + size) of format fmt; returns {@code (blockAt << 32) |
   * blockLength} (header_block's start and length), or throws naming what is wrong.
   */
  static long block(byte[] b, int m, int size, byte fmt, String where) {
    if (fmt == PROTOBUF) {
      if (size < PB_BLOCK_KEY_AT + 2) {
        throw bad(where, "an a0py.PacketHeaders of " + size + " bytes is shorter than a0py writes");
      }
      for (int i = 0; i < PB_KEYS.length; i++) {
        int k = m + PB_AT[i] - PB_KEYS[i].length;
        if (!Arrays.equals(b, k, k + PB_KEYS[i].length, PB_KEYS[i], 0, PB_KEYS[i].length)) {
          throw bad(where, "a field of a0py.PacketHeaders is not where a0py writes it");
        }
      }
      if (b[m + PB_BLOCK_KEY_AT] != PB_BLOCK_KEY) {
        throw bad(where, "a0py.PacketHeaders: header_block is not where a0py writes it");
      }
      int pos = m + PB_BLOCK_KEY_AT + 1;
      long n = 0;
      for (int shift = 0; ; shift += 7) {
        if (pos >= m + size || shift > 63) {
          throw bad(where, "a0py.PacketHeaders: header_block's length runs past the message");
        }
        int x = b[pos++] & 0xff;
        n |= (long) (x & 0x7f) << shift;
        if (x < 0x80) {
          break;
        }
      }
      if (n != m + size - pos) {
        throw bad(where, "a0py.PacketHeaders: header_block's length is not the rest of the message");
      }
      return ((long) (pos - m) << 32) | n;
    }
    if (size < CDR_BLOCK_AT + 4 || b[m] != 0 || b[m + 1] != 1) {
      throw bad(where, "not little-endian CDR of an a0py_msgs/msg/PacketHeaders");
    }
    long n = le32(b, m + CDR_BLOCK_AT) & 0xFFFFFFFFL;
    long rest = size - CDR_BLOCK_AT - 4;
    if (n > rest || rest - n > 3) {
      throw bad(where, "a0py_msgs/msg/PacketHeaders: header_block's length is not the rest of the message");
    }
    return ((long) (CDR_BLOCK_AT + 4) << 32) | n;
  }

  /** The bytes of the cut packet a checked message gives ({@code block} from {@link #block}). */
  static int cutSize(byte[] b, int m, byte fmt, long block) {
    int len = (int) block;
    return flags(b, m, fmt) == NOT_A_PACKET ? len : PacketLayout.INDEX_OFF + len;
  }

  /** Writes the cut packet of a checked message into out at o ({@link #cutSize} bytes). */
  static void writeCut(byte[] b, int m, byte fmt, long block, byte[] out, int o, String where) {
    int at = m + (int) (block >>> 32);
    int len = (int) block;
    long flags = flags(b, m, fmt);
    if (flags == NOT_A_PACKET) {
      System.arraycopy(b, at, out, o, len);
      return;
    }
    if (flags > 0xFFFF) {
      throw bad(where, "headers message flags do not fit a packet's 16 bits");
    }
    int[] fieldAt = fmt == PROTOBUF ? PB_AT : CDR_AT;
    Arrays.fill(out, o, o + PacketLayout.INDEX_OFF, (byte) 0);
    putLe(out, o + PacketLayout.MAGIC_OFF, PacketLayout.MAGIC, 4);
    putLe(out, o + PacketLayout.VERSION_OFF, PacketLayout.VERSION, 2);
    putLe(out, o + PacketLayout.FLAGS_OFF, flags, 2);
    putLe(out, o + PacketLayout.PAYLOAD_OFF_OFF, PacketLayout.INDEX_OFF + len, 8);
    for (int i = 1; i < SIZE.length; i++) {
      System.arraycopy(b, m + fieldAt[i], out, o + PACKET_AT[i], SIZE[i]);
    }
    System.arraycopy(b, at, out, o + PacketLayout.INDEX_OFF, len);
  }

  private static long flags(byte[] b, int m, byte fmt) {
    return le32(b, m + (fmt == PROTOBUF ? PB_AT[0] : CDR_AT[0])) & 0xFFFFFFFFL;
  }

  private static void putLe(byte[] out, int o, long v, int bytes) {
    for (int i = 0; i < bytes; i++) {
      out[o + i] = (byte) (v >>> (8 * i));
    }
  }

  private static RecordingFormatException bad(String where, String why) {
    return new RecordingFormatException(where + ": " + why);
  }
}
