package a0py.spark.jvm;

import java.math.BigInteger;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * ROS 2 messages in CDR decoded straight into Spark's column vectors: the
 * {@code message} struct of a {@code decode=true} read, with the types and
 * values the Python decoder gives (docs/spark.md "Decoded columns":
 * {@code builtin_interfaces/msg/Time} a timestamp in µs, Duration bigint ns,
 * uint64 decimal(20,0), uint8/byte/char arrays binary, int8..uint16 int,
 * uint32 and int64 bigint).
 *
 * <p>CDR as ROS 2 writes it (XCDR1): a 4-byte encapsulation header (byte 1: 1
 * little endian, 0 big endian), then the fields, every offset counted from
 * after the header; a primitive aligned to its size (8 at most), a string or
 * sequence length (uint32) to 4, a string's length counting its NUL, a
 * sequence's primitives aligned to their size only when it has any; at most 3
 * bytes of padding after the last field.
 *
 * <p>A message that does not decode gives a null {@code message} and its
 * reason in {@code decode_error}, worded as the Python decoder words it (its
 * library's errors: "Invalid string length N at offset P.", Python's own
 * struct and UTF-8 messages, ...), never an exception out of the reader.
 * Every length and offset is checked against the message's bytes before it is
 * followed; a sequence longer than 2**28 elements is refused as the Python
 * decoder refuses it.
 */
final class CdrDecoder {
  /** The longest sequence a message may declare (as the Python decoder's). */
  static final long MAX_SEQUENCE = 1L << 28;
  private static final int MAX_ERROR_CHARS = 300;

  /** Why a message does not decode; no stack trace (bad input is data, not a bug). */
  static final class Fail extends Exception {
    private static final long serialVersionUID = 1L;
    final boolean wrapped; // an error the Python decoder reports as "Could not deserialize 'T': ..."

    Fail(String msg, boolean wrapped) {
      super(msg, null, false, false);
      this.wrapped = wrapped;
    }
  }

  /** The bytes of one message being read: {@code pos} counts from after the encapsulation header. */
  static final class Cursor {
    byte[] b;
    int base;
    int len;
    int pos;
    boolean le;

    void align(int a) {
      pos = (pos + a - 1) & -a;
    }

    void need(int size) throws Fail {
      if ((long) pos + size > len) {
        throw new Fail("unpack_from requires a buffer of at least " + ((long) pos + size) + " bytes for unpacking "
            + size + " bytes at offset " + pos + " (actual buffer size is " + len + ")", true);
      }
    }

    /** numpy.frombuffer's checks for {@code count} items of {@code size} bytes at pos. */
    void needArray(long count, int size) throws Fail {
      if (pos > len) {
        throw new Fail("offset must be non-negative and no greater than buffer length (" + len + ")", true);
      }
      if (count * size > len - pos) {
        throw new Fail("buffer is smaller than requested size", true);
      }
    }

    int u8(int at) {
      return b[base + at] & 0xff;
    }

    int i16(int at) {
      int i = base + at;
      int v = le ? (b[i] & 0xff) | (b[i + 1] << 8) : (b[i + 1] & 0xff) | (b[i] << 8);
      return (short) v;
    }

    int i32(int at) {
      int i = base + at;
      return le ? (b[i] & 0xff) | (b[i + 1] & 0xff) << 8 | (b[i + 2] & 0xff) << 16 | b[i + 3] << 24
          : (b[i + 3] & 0xff) | (b[i + 2] & 0xff) << 8 | (b[i + 1] & 0xff) << 16 | b[i] << 24;
    }

    long i64(int at) {
      long lo = i32(at) & 0xffffffffL;
      long hi = i32(at + 4) & 0xffffffffL;
      return le ? lo | hi << 32 : hi | lo << 32;
    }

    /** A uint32 length at pos (aligned to 4), pos moved past it. */
    long length() throws Fail {
      align(4);
      need(4);
      long n = i32(pos) & 0xffffffffL;
      pos += 4;
      return n;
    }

    /** The Python decoder's sequence check (pos after the length). */
    void checkSequence(long size, int minimum) throws Fail {
      if (pos + size * minimum > len || size > MAX_SEQUENCE) {
        throw new Fail("Invalid sequence length " + size + " at offset " + pos + ".", false);
      }
    }
  }

  // -- the nodes of a type: each reads its bytes and, given a vector, writes its value ------------

  /** One field's reader; {@code out} null: read (and check) only. */
  abstract static class Node {
    abstract void read(Cursor c, WritableColumnVector out, int idx) throws Fail;
  }

  private static final int BOOL = 0;
  private static final int I8 = 1;
  private static final int U8 = 2;
  private static final int I16 = 3;
  private static final int U16 = 4;
  private static final int I32 = 5;
  private static final int U32 = 6;
  private static final int I64 = 7;
  private static final int U64 = 8;
  private static final int F32 = 9;
  private static final int F64 = 10;
  private static final Map<String, Integer> PRIM = new HashMap<>();

  static {
    PRIM.put("bool", BOOL);
    PRIM.put("byte", I8);
    PRIM.put("int8", I8);
    PRIM.put("char", U8);
    PRIM.put("uint8", U8);
    PRIM.put("int16", I16);
    PRIM.put("uint16", U16);
    PRIM.put("int32", I32);
    PRIM.put("uint32", U32);
    PRIM.put("int64", I64);
    PRIM.put("uint64", U64);
    PRIM.put("float32", F32);
    PRIM.put("float64", F64);
  }

  private static final int[] SIZE = {1, 1, 1, 2, 2, 4, 4, 8, 8, 4, 8};

  static DataType primType(int p) {
    switch (p) {
      case BOOL:
        return DataTypes.BooleanType;
      case I64:
      case U32:
        return DataTypes.LongType;
      case U64:
        return DataTypes.createDecimalType(20, 0);
      case F32:
        return DataTypes.FloatType;
      case F64:
        return DataTypes.DoubleType;
      default:
        return DataTypes.IntegerType;
    }
  }

  /** Reads primitive p at pos (aligned and checked) into out[idx]. */
  static void putPrim(int p, Cursor c, WritableColumnVector out, int idx) {
    int at = c.pos;
    switch (p) {
      case BOOL:
        out.putBoolean(idx, c.u8(at) != 0);
        break;
      case I8:
        out.putInt(idx, (byte) c.u8(at));
        break;
      case U8:
        out.putInt(idx, c.u8(at));
        break;
      case I16:
        out.putInt(idx, c.i16(at));
        break;
      case U16:
        out.putInt(idx, c.i16(at) & 0xffff);
        break;
      case I32:
        out.putInt(idx, c.i32(at));
        break;
      case U32:
        out.putLong(idx, c.i32(at) & 0xffffffffL);
        break;
      case I64:
        out.putLong(idx, c.i64(at));
        break;
      case U64: {
        long v = c.i64(at);
        byte[] be = new byte[8];
        for (int i = 0; i < 8; i++) {
          be[i] = (byte) (v >>> (56 - 8 * i));
        }
        byte[] unscaled = new BigInteger(1, be).toByteArray();
        out.putByteArray(idx, unscaled, 0, unscaled.length);
        break;
      }
      case F32:
        out.putFloat(idx, Float.intBitsToFloat(c.i32(at)));
        break;
      default:
        out.putDouble(idx, Double.longBitsToDouble(c.i64(at)));
        break;
    }
  }

  static final class Prim extends Node {
    final int p;
    final int size;

    Prim(int p) {
      this.p = p;
      this.size = SIZE[p];
    }

    @Override
    void read(Cursor c, WritableColumnVector out, int idx) throws Fail {
      c.align(size);
      c.need(size);
      if (out != null) {
        putPrim(p, c, out, idx);
      }
      c.pos += size;
    }
  }

  /** builtin_interfaces Time (timestamp µs) or Duration (bigint ns). */
  static final class Stamp extends Node {
    final boolean time;

    Stamp(boolean time) {
      this.time = time;
    }

    @Override
    void read(Cursor c, WritableColumnVector out, int idx) throws Fail {
      c.align(4);
      c.need(4);
      long sec = c.i32(c.pos);
      c.pos += 4;
      c.need(4);
      long nsec = c.i32(c.pos) & 0xffffffffL;
      c.pos += 4;
      if (out != null) {
        out.putLong(idx, time ? sec * 1_000_000L + nsec / 1000 : sec * 1_000_000_000L + nsec);
      }
    }
  }

  static final class Str extends Node {
    @Override
    void read(Cursor c, WritableColumnVector out, int idx) throws Fail {
      c.align(4);
      int at = c.pos;
      c.need(4);
      long size = c.i32(at) & 0xffffffffL;
      long end = at + 4 + size;
      if (size < 1 || end > c.len) {
        throw new Fail("Invalid string length " + size + " at offset " + at + ".", false);
      }
      if (c.u8((int) end - 1) != 0) {
        throw new Fail("Missing string terminator at offset " + (end - 1) + ".", false);
      }
      int n = (int) size - 1;
      checkUtf8(c.b, c.base + at + 4, n);
      if (out != null) {
        out.putByteArray(idx, c.b, c.base + at + 4, n);
      }
      c.pos = (int) end;
    }
  }

  /** An array (fixed: {@code count} >= 1) or a sequence ({@code count} -1) of uint8, byte or char, as binary. */
  static final class Bytes extends Node {
    final int count;

    Bytes(int count) {
      this.count = count;
    }

    @Override
    void read(Cursor c, WritableColumnVector out, int idx) throws Fail {
      long n = count;
      if (count < 0) {
        n = c.length();
        c.checkSequence(n, 1);
      }
      c.needArray(n, 1);
      if (out != null) {
        out.putByteArray(idx, c.b, c.base + c.pos, (int) n);
      }
      c.pos += (int) n;
    }
  }

  /** An array or sequence of other primitives: array&lt;T&gt;. */
  static final class Prims extends Node {
    final int p;
    final int size;
    final int count;

    Prims(int p, int count) {
      this.p = p;
      this.size = SIZE[p];
      this.count = count;
    }

    @Override
    void read(Cursor c, WritableColumnVector out, int idx) throws Fail {
      long n = count;
      if (count < 0) {
        n = c.length();
        c.checkSequence(n, size);
        if (n > 0) {
          c.align(size);
        }
      } else {
        c.align(size);
      }
      c.needArray(n, size);
      int k = (int) n;
      if (out != null) {
        WritableColumnVector child = out.arrayData();
        int start = child.getElementsAppended();
        reserve(child, start + k);
        int at = c.base + c.pos;
        if (c.le && p == F64) { // whole runs copied where the bytes are Spark's own layout
          child.putDoublesLittleEndian(start, k, c.b, at);
        } else if (c.le && p == F32) {
          child.putFloatsLittleEndian(start, k, c.b, at);
        } else if (c.le && p == I32) {
          child.putIntsLittleEndian(start, k, c.b, at);
        } else if (c.le && p == I64) {
          child.putLongsLittleEndian(start, k, c.b, at);
        } else {
          int save = c.pos;
          for (int i = 0; i < k; i++) {
            putPrim(p, c, child, start + i);
            c.pos += size;
          }
          c.pos = save;
        }
        child.addElementsAppended(k);
        out.putArray(idx, start, k);
      }
      c.pos += k * size;
    }
  }

  /** An array or sequence of strings, messages, times or durations. */
  static final class Items extends Node {
    final Node item;
    final int count;
    final int minimum; // the Python decoder's least bytes an element takes (its sequence check)

    Items(Node item, int count, int minimum) {
      this.item = item;
      this.count = count;
      this.minimum = minimum;
    }

    @Override
    void read(Cursor c, WritableColumnVector out, int idx) throws Fail {
      long n = count;
      if (count < 0) {
        n = c.length();
        c.checkSequence(n, minimum);
      }
      int k = (int) n;
      if (out == null) {
        for (int i = 0; i < k; i++) {
          item.read(c, null, 0);
        }
        return;
      }
      WritableColumnVector child = out.arrayData();
      int start = child.getElementsAppended();
      reserve(child, start + k);
      child.addElementsAppended(k); // claimed before the items write, which may append arrays of their own
      for (int i = 0; i < k; i++) {
        item.read(c, child, start + i);
      }
      out.putArray(idx, start, k);
    }
  }

  static final class Struct extends Node {
    final Node[] fields;
    final int[] slot; // per field: its child in the output struct, -1 where the query does not ask for it

    Struct(Node[] fields, int[] slot) {
      this.fields = fields;
      this.slot = slot;
    }

    @Override
    void read(Cursor c, WritableColumnVector out, int idx) throws Fail {
      for (int i = 0; i < fields.length; i++) {
        int s = slot[i];
        fields[i].read(c, out == null || s < 0 ? null : out.getChild(s), idx);
      }
    }
  }

  /** Grows {@code v} (and a struct's children, element for element) to hold {@code n} values. */
  static void reserve(WritableColumnVector v, int n) {
    v.reserve(n);
    if (v.dataType() instanceof StructType) {
      int k = ((StructType) v.dataType()).size();
      for (int i = 0; i < k; i++) {
        reserve(v.getChild(i), n);
      }
    }
  }

  // -- the Spark type, and the plan of a type against the type a query asks for ----------------

  /** The Spark type of the top type of {@code types} ({@link RosMsg#parse}). */
  static StructType sparkType(Map<String, List<RosMsg.Field>> types) {
    return (StructType) structType(types, types.get("").get(0).ref);
  }

  private static DataType structType(Map<String, List<RosMsg.Field>> types, String name) {
    StructType s = new StructType();
    for (RosMsg.Field f : types.get(name)) {
      s = s.add(f.name, fieldType(types, f), true);
    }
    return s;
  }

  private static DataType fieldType(Map<String, List<RosMsg.Field>> types, RosMsg.Field f) {
    DataType item;
    if (f.base != null) {
      if (f.cardinality != RosMsg.SCALAR && isByte(f.base)) {
        return DataTypes.BinaryType;
      }
      item = f.base.equals("string") ? DataTypes.StringType : primType(PRIM.get(f.base));
    } else if (f.ref.equals(RosMsg.TIME)) {
      item = DataTypes.TimestampType;
    } else if (f.ref.equals(RosMsg.DURATION)) {
      item = DataTypes.LongType;
    } else {
      item = structType(types, f.ref);
    }
    return f.cardinality == RosMsg.SCALAR ? item : DataTypes.createArrayType(item, true);
  }

  private static boolean isByte(String base) {
    return base.equals("uint8") || base.equals("byte") || base.equals("char");
  }

  private final Node root;
  private final String schemaName;
  private final String typeName;

  /**
   * The decoder of {@code types}' top type writing the fields of {@code want} (the full type, or the
   * part of it a query asks for, from Spark's nested column pruning); {@code schemaName} is the
   * channel's schema name, which starts each error as in the Python decoder.
   */
  CdrDecoder(Map<String, List<RosMsg.Field>> types, StructType want, String schemaName) {
    this.typeName = types.get("").get(0).ref;
    this.schemaName = schemaName == null || schemaName.isEmpty() ? "message" : schemaName;
    this.root = struct(types, typeName, want);
  }

  private static Node struct(Map<String, List<RosMsg.Field>> types, String name, DataType want) {
    List<RosMsg.Field> fs = types.get(name);
    Node[] nodes = new Node[fs.size()];
    int[] slot = new int[fs.size()];
    StructType w = want instanceof StructType ? (StructType) want : null;
    for (int i = 0; i < nodes.length; i++) {
      RosMsg.Field f = fs.get(i);
      slot[i] = -1;
      DataType sub = null;
      if (w != null) {
        for (int j = 0; j < w.size(); j++) {
          if (w.fields()[j].name().toLowerCase(Locale.ROOT).equals(f.name.toLowerCase(Locale.ROOT))) {
            slot[i] = j;
            sub = w.fields()[j].dataType();
            break;
          }
        }
      }
      nodes[i] = field(types, f, sub);
    }
    return new Struct(nodes, slot);
  }

  private static Node field(Map<String, List<RosMsg.Field>> types, RosMsg.Field f, DataType want) {
    int count = f.cardinality == RosMsg.ARRAY ? f.size : f.cardinality == RosMsg.SEQUENCE ? -1 : 0;
    if (f.base != null && f.base.equals("string")) {
      return count == 0 ? new Str() : new Items(new Str(), count, 5);
    }
    if (f.base != null) {
      int p = PRIM.get(f.base);
      if (count == 0) {
        return new Prim(p);
      }
      return isByte(f.base) ? new Bytes(count) : new Prims(p, count);
    }
    Node item;
    if (f.ref.equals(RosMsg.TIME) || f.ref.equals(RosMsg.DURATION)) {
      item = new Stamp(f.ref.equals(RosMsg.TIME));
    } else {
      DataType w = want instanceof ArrayType ? ((ArrayType) want).elementType() : want;
      item = struct(types, f.ref, w);
    }
    return count == 0 ? item : new Items(item, count, 1);
  }

  private final Cursor cur = new Cursor();

  /**
   * Decodes the message at {@code b[off, off + size)} into {@code out[row]} (out null: checks only);
   * returns null, or the error for {@code decode_error} (then out[row] holds garbage: the caller
   * marks it null).
   */
  String decode(byte[] b, int off, int size, WritableColumnVector out, int row) {
    Cursor c = cur;
    try {
      if (size < 4 || b[off] != 0 || (b[off + 1] != 0 && b[off + 1] != 1)) {
        throw new Fail("Invalid or unsupported CDR encapsulation.", false);
      }
      c.b = b;
      c.base = off + 4;
      c.len = size - 4;
      c.pos = 0;
      c.le = b[off + 1] == 1;
      root.read(c, out, row);
      if ((long) c.pos + 4 + 3 < size) {
        throw new Fail("CDR message size mismatch for '" + typeName + "'.", false);
      }
      return null;
    } catch (Fail f) {
      String msg = f.wrapped ? "Could not deserialize '" + typeName + "': " + f.getMessage() : f.getMessage();
      String text = schemaName + ": SerdeError: " + msg;
      return text.length() <= MAX_ERROR_CHARS ? text : text.substring(0, MAX_ERROR_CHARS - 3) + "...";
    } finally {
      c.b = null;
    }
  }

  /** Python's strict UTF-8 decoding: its error, worded as Python words it, for bytes that are not UTF-8. */
  static void checkUtf8(byte[] s, int off, int n) throws Fail {
    int i = 0;
    while (i < n) {
      int b0 = s[off + i] & 0xff;
      if (b0 < 0x80) {
        i++;
        continue;
      }
      if (b0 < 0xC2 || b0 > 0xF4) {
        throw utf8(s, off, i, i + 1, "invalid start byte");
      }
      int need;
      int lo = 0x80;
      int hi = 0xBF;
      if (b0 < 0xE0) {
        need = 1;
      } else if (b0 < 0xF0) {
        need = 2;
        lo = b0 == 0xE0 ? 0xA0 : 0x80;
        hi = b0 == 0xED ? 0x9F : 0xBF;
      } else {
        need = 3;
        lo = b0 == 0xF0 ? 0x90 : 0x80;
        hi = b0 == 0xF4 ? 0x8F : 0xBF;
      }
      for (int k = 1; k <= need; k++) {
        if (i + k >= n) {
          throw utf8(s, off, i, n, "unexpected end of data");
        }
        int cb = s[off + i + k] & 0xff;
        if (cb < (k == 1 ? lo : 0x80) || cb > (k == 1 ? hi : 0xBF)) {
          throw utf8(s, off, i, i + k, "invalid continuation byte");
        }
      }
      i += need + 1;
    }
  }

  private static Fail utf8(byte[] s, int off, int start, int end, String why) {
    String m = end - start == 1
        ? String.format(Locale.ROOT, "'utf-8' codec can't decode byte 0x%02x in position %d: %s",
            s[off + start] & 0xff, start, why)
        : String.format(Locale.ROOT, "'utf-8' codec can't decode bytes in position %d-%d: %s", start, end - 1, why);
    return new Fail(m, true);
  }
}
