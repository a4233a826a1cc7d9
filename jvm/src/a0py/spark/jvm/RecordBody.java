package a0py.spark.jvm;

import static a0py.spark.jvm.LittleEndian.le16;
import static a0py.spark.jvm.LittleEndian.le32;
import static a0py.spark.jvm.LittleEndian.le64;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Bounds-checked reads of one MCAP record's body, field after field, each
 * named as the specification names it: a field that would run past the body
 * is a RecordingFormatException naming the file, the byte offset, the record
 * and the field.
 */
final class RecordBody {
  /** A Map<uint16, uint64> entry. */
  private static final int U16_U64_ENTRY = Short.BYTES + Long.BYTES;

  final byte[] buf;
  int pos;
  final int end;
  final String path;
  final long base; // file offset of buf[0]
  final String what;

  RecordBody(byte[] buf, String path, long base, String what, int start, int end) {
    this.buf = buf;
    this.pos = start;
    this.end = end;
    this.path = path;
    this.base = base;
    this.what = what;
  }

  void need(long n, String field) {
    if (n < 0 || n > end - pos) {
      throw RecordingFormatException.at(path, base + pos, what + ": field " + field + " needs "
          + Long.toUnsignedString(n) + " bytes, " + (end - pos) + " left in the record");
    }
  }

  int u16(String f) {
    return (int) unsigned(Short.BYTES, f);
  }

  long u32(String f) {
    return unsigned(Integer.BYTES, f);
  }

  long u64(String f) {
    return unsigned(Long.BYTES, f);
  }

  /** The next field, of {@code width} bytes. */
  private long unsigned(int width, String f) {
    need(width, f);
    long v = width == Short.BYTES ? le16(buf, pos) : width == Integer.BYTES ? le32(buf, pos) : le64(buf, pos);
    pos += width;
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
    RecordBody sub = new RecordBody(buf, path, base, what, pos, stop);
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
    if (n % U16_U64_ENTRY != 0) {
      throw RecordingFormatException.at(path, base + pos, what + ": field " + f + " has " + n
          + " bytes, not a multiple of " + U16_U64_ENTRY);
    }
    long[][] out = new long[(int) (n / U16_U64_ENTRY)][];
    for (int i = 0; i < out.length; i++) {
      int at = pos + U16_U64_ENTRY * i;
      out[i] = new long[] {le16(buf, at), le64(buf, at + Short.BYTES)};
    }
    pos += (int) n;
    return out;
  }

  /** The UTF-8 text of b[off, off + n), or a RecordingFormatException naming {@code at} and {@code what}. */
  static String utf8(byte[] b, int off, int n, String path, long at, String what) {
    try {
      return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(b, off, n)).toString();
    } catch (CharacterCodingException e) {
      throw RecordingFormatException.at(path, at, what);
    }
  }
}
