package a0py.spark.jvm;

import static a0py.spark.jvm.LittleEndian.le16;
import static a0py.spark.jvm.LittleEndian.le32;
import static a0py.spark.jvm.LittleEndian.le64;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The a0py packet in a message's data: the C decoder's checks (nothing is
 * read outside the packet, every index entry and string is checked before
 * it is followed), and the packet's seq and time_mono, from its standard
 * block or, without one, from its a0_transport_seq and a0_time_mono
 * headers. Offsets are {@link PacketLayout}'s, generated from the C header.
 */
final class PacketFields {
  /** The standard headers' keys, in the standard block's order. */
  static final byte[][] STD_KEYS = new byte[PacketLayout.STANDARD_HEADERS.length][];

  static {
    for (int k = 0; k < STD_KEYS.length; k++) {
      STD_KEYS[k] = PacketLayout.STANDARD_HEADERS[k].getBytes(StandardCharsets.UTF_8);
    }
  }

  static final int STD_TIME_MONO = std("a0_time_mono");
  static final int STD_TIME_WALL = std("a0_time_wall");
  static final int STD_WRITER_ID = std("a0_writer_id");
  static final int STD_WRITER_SEQ = std("a0_writer_seq");
  static final int STD_TRANSPORT_SEQ = std("a0_transport_seq");
  private static final byte[] K_SEQ = STD_KEYS[STD_TRANSPORT_SEQ];
  private static final byte[] K_MONO = STD_KEYS[STD_TIME_MONO];

  /** The packet's a0_transport_seq after {@link #read}, -1 when it has none. */
  long seq;
  /** The packet's a0_time_mono after {@link #read}, Long.MIN_VALUE when it has none (a null). */
  long mono;

  private static int std(String key) {
    int k = Arrays.asList(PacketLayout.STANDARD_HEADERS).indexOf(key);
    if (k < 0) {
      throw new IllegalStateException("no standard header " + key + " in PacketLayout");
    }
    return k;
  }

  /** Does the packet at p hold the standard block? */
  static boolean hasStd(byte[] b, int p) {
    return (le16(b, p + PacketLayout.FLAGS_OFF) & PacketLayout.FLAG_HAS_STD) != 0;
  }

  static int headerCount(byte[] b, int p) {
    return (int) le32(b, p + PacketLayout.HEADER_COUNT_OFF);
  }

  /** Where the packet at p has header index entry j. */
  static int entry(int p, int j) {
    return p + PacketLayout.INDEX_OFF + PacketLayout.ENTRY_SIZE * j;
  }

  /** The C decoder's checks of the packet at p (size bytes): null when it passes, else why not. */
  static String check(byte[] b, int p, int size) {
    if (size < PacketLayout.INDEX_OFF) {
      return "shorter than the " + PacketLayout.INDEX_OFF + " bytes of the fixed header and standard block";
    }
    if ((int) le32(b, p + PacketLayout.MAGIC_OFF) != PacketLayout.MAGIC) {
      return "field magic";
    }
    if (le16(b, p + PacketLayout.VERSION_OFF) != PacketLayout.VERSION) {
      return "field version";
    }
    if ((le16(b, p + PacketLayout.FLAGS_OFF) & ~PacketLayout.FLAG_HAS_STD) != 0) {
      return "field flags";
    }
    if (le32(b, p + PacketLayout.RESERVED_OFF) != 0) {
      return "field reserved";
    }
    long count = le32(b, p + PacketLayout.HEADER_COUNT_OFF);
    long poff = le64(b, p + PacketLayout.PAYLOAD_OFF_OFF);
    long psize = le64(b, p + PacketLayout.PAYLOAD_SIZE_OFF);
    long indexEnd = PacketLayout.INDEX_OFF + (long) PacketLayout.ENTRY_SIZE * count;
    if (poff < indexEnd || poff % PacketLayout.ALIGN != 0 || poff > size) {
      return "field payload_off";
    }
    if (psize != size - poff) {
      return "field payload_size";
    }
    for (int i = 0; i < count; i++) {
      int e = entry(p, i);
      long ko = le32(b, e + PacketLayout.ENTRY_KEY_OFF);
      long kl = le32(b, e + PacketLayout.ENTRY_KEY_LEN);
      long vo = le32(b, e + PacketLayout.ENTRY_VAL_OFF);
      long vl = le32(b, e + PacketLayout.ENTRY_VAL_LEN);
      if (ko < indexEnd || ko + kl + 1 > poff || b[p + (int) (ko + kl)] != 0) {
        return "a header key outside the strings area or without its NUL";
      }
      if (vo < indexEnd || vo + vl + 1 > poff || b[p + (int) (vo + vl)] != 0) {
        return "a header value outside the strings area or without its NUL";
      }
    }
    return null;
  }

  /** Where the checked packet at p has its payload. */
  static int payloadOffset(byte[] b, int p) {
    return (int) le64(b, p + PacketLayout.PAYLOAD_OFF_OFF);
  }

  /** seq and mono of the checked packet at p. */
  void read(byte[] recs, int p) {
    seq = -1;
    mono = Long.MIN_VALUE;
    if (hasStd(recs, p)) {
      seq = le64(recs, p + PacketLayout.TRANSPORT_SEQ_OFF);
      long m = le64(recs, p + PacketLayout.TIME_MONO_OFF);
      mono = m >= 0 ? m : Long.MIN_VALUE;
      return;
    }
    long entries = headerCount(recs, p);
    boolean gotSeq = false;
    boolean gotMono = false;
    for (int j = 0; j < entries && !(gotSeq && gotMono); j++) {
      int e = entry(p, j);
      long kl = le32(recs, e + PacketLayout.ENTRY_KEY_LEN);
      int ko = p + (int) le32(recs, e + PacketLayout.ENTRY_KEY_OFF);
      int vo = p + (int) le32(recs, e + PacketLayout.ENTRY_VAL_OFF);
      long vl = le32(recs, e + PacketLayout.ENTRY_VAL_LEN);
      if (kl == K_SEQ.length && !gotSeq && Arrays.equals(recs, ko, ko + K_SEQ.length, K_SEQ, 0, K_SEQ.length)) {
        gotSeq = true;
        seq = parseDec(recs, vo, vl);
      } else if (kl == K_MONO.length && !gotMono
          && Arrays.equals(recs, ko, ko + K_MONO.length, K_MONO, 0, K_MONO.length)) {
        gotMono = true;
        long m = parseDec(recs, vo, vl);
        mono = m >= 0 ? m : Long.MIN_VALUE;
      }
    }
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
}
