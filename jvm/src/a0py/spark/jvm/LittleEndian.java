package a0py.spark.jvm;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * Little-endian loads from byte arrays, as every integer of MCAP and of an
 * a0py packet is stored: one bounds-checked load a field (an index past the
 * array throws ArrayIndexOutOfBoundsException, as b[p] does).
 */
final class LittleEndian {
  private static final VarHandle LE16 = MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle LE32 = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle LE64 = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

  private LittleEndian() {}

  /** The unsigned 16-bit value at b[p]. */
  static int le16(byte[] b, int p) {
    return (short) LE16.get(b, p) & 0xffff;
  }

  /** The unsigned 32-bit value at b[p]. */
  static long le32(byte[] b, int p) {
    return (int) LE32.get(b, p) & 0xffffffffL;
  }

  /** The 64-bit value at b[p] (unsigned in the formats: negative above 2**63 - 1). */
  static long le64(byte[] b, int p) {
    return (long) LE64.get(b, p);
  }
}
