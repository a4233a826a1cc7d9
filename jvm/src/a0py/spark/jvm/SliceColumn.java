package a0py.spark.jvm;

import java.util.Arrays;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A binary column whose rows are slices of one chunk's decompressed records:
 * a row is its offset and length in that buffer, so no payload is copied into
 * the batch (Spark copies a row's bytes out when it reads them, as it does
 * from its own vectors). The buffer is the chunk's until the reader's next
 * batch, as Spark's batches are.
 */
final class SliceColumn extends ColumnVector {
  private byte[] data = new byte[0];
  private int[] offset = new int[4096];
  private int[] length = new int[4096];
  private boolean[] isNull = new boolean[4096];
  private int nulls;

  SliceColumn() {
    super(DataTypes.BinaryType);
  }

  /** Empties the column for {@code rows} rows of slices of {@code buf}. */
  void reset(byte[] buf, int rows) {
    data = buf;
    nulls = 0;
    if (offset.length < rows) {
      int n = Math.max(rows, 2 * offset.length);
      offset = new int[n];
      length = new int[n];
      isNull = new boolean[n];
    }
  }

  /** Row r: bytes [off, off + len) of the buffer. */
  void put(int r, int off, int len) {
    offset[r] = off;
    length[r] = len;
    isNull[r] = false;
  }

  void putNull(int r) {
    isNull[r] = true;
    nulls++;
  }

  @Override
  public byte[] getBinary(int r) {
    if (isNull[r]) {
      return null;
    }
    int o = offset[r];
    return Arrays.copyOfRange(data, o, o + length[r]);
  }

  @Override
  public UTF8String getUTF8String(int r) {
    return isNull[r] ? null : UTF8String.fromBytes(data, offset[r], length[r]);
  }

  @Override
  public boolean isNullAt(int r) {
    return isNull[r];
  }

  @Override
  public boolean hasNull() {
    return nulls > 0;
  }

  @Override
  public int numNulls() {
    return nulls;
  }

  @Override
  public void close() {
    data = null;
  }

  @Override
  public boolean getBoolean(int r) {
    throw unsupported();
  }

  @Override
  public byte getByte(int r) {
    throw unsupported();
  }

  @Override
  public short getShort(int r) {
    throw unsupported();
  }

  @Override
  public int getInt(int r) {
    throw unsupported();
  }

  @Override
  public long getLong(int r) {
    throw unsupported();
  }

  @Override
  public float getFloat(int r) {
    throw unsupported();
  }

  @Override
  public double getDouble(int r) {
    throw unsupported();
  }

  @Override
  public ColumnarArray getArray(int r) {
    throw unsupported();
  }

  @Override
  public ColumnarMap getMap(int r) {
    throw unsupported();
  }

  @Override
  public Decimal getDecimal(int r, int precision, int scale) {
    throw unsupported();
  }

  @Override
  public ColumnVector getChild(int ordinal) {
    throw unsupported();
  }

  private static UnsupportedOperationException unsupported() {
    return new UnsupportedOperationException("the payload column is binary");
  }
}
