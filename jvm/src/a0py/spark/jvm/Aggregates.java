package a0py.spark.jvm;

import java.io.Serializable;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.expressions.aggregate.Max;
import org.apache.spark.sql.connector.expressions.aggregate.Min;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Aggregates a query pushes down (Spark's SupportsPushDownAggregates) that
 * the reader computes from the records without filling any column: without
 * GROUP BY, {@code count(*)} and {@code min}/{@code max} of {@code seq}.
 * Each partition gives one row of partial results, which Spark combines (the
 * push is never complete). The rows counted are exactly the rows the scan
 * gives, with the same pushed filters, gap rows and typed joins. (Spark 4.3
 * pushes {@code length} of strings only, so {@code sum(length(payload))} of
 * the binary payload is not offered: the scan gives that column.)
 */
final class Aggregates implements Serializable {
  private static final long serialVersionUID = 1L;
  static final byte COUNT = 0;
  static final byte MIN = 1;
  static final byte MAX = 2;
  /** What an aggregate reads: the row itself (count) or its seq. */
  static final byte ROW = 0;
  static final byte SEQ = 1;

  private final byte[] op;
  private final byte[] of;
  private final String text;

  private Aggregates(byte[] op, byte[] of, String text) {
    this.op = op;
    this.of = of;
    this.text = text;
  }

  /** The aggregates of {@code a} when the reader computes them all, else null (Spark aggregates the rows). */
  static Aggregates of(Aggregation a) {
    if (a.groupByExpressions().length > 0 || a.aggregateExpressions().length == 0) {
      return null;
    }
    AggregateFunc[] fs = a.aggregateExpressions();
    byte[] op = new byte[fs.length];
    byte[] of = new byte[fs.length];
    StringBuilder text = new StringBuilder();
    for (int i = 0; i < fs.length; i++) {
      AggregateFunc f = fs[i];
      Expression col;
      if (f instanceof CountStar) {
        op[i] = COUNT;
        of[i] = ROW;
        text.append(i > 0 ? ", " : "").append(f);
        continue;
      } else if (f instanceof Min) {
        op[i] = MIN;
        col = ((Min) f).column();
      } else if (f instanceof Max) {
        op[i] = MAX;
        col = ((Max) f).column();
      } else {
        return null; // a sum of seqs could overflow where Spark's ANSI sum fails: Spark sums them
      }
      if (!isColumn(col, "seq")) {
        return null;
      }
      of[i] = SEQ;
      text.append(i > 0 ? ", " : "").append(f);
    }
    return new Aggregates(op, of, text.toString());
  }

  private static boolean isColumn(Expression e, String name) {
    return e instanceof NamedReference && ((NamedReference) e).fieldNames().length == 1
        && ((NamedReference) e).fieldNames()[0].equals(name);
  }

  /** The scan's columns: one a pushed aggregate, of the type Spark gives its partial result. */
  StructType schema() {
    StructType s = new StructType();
    for (int i = 0; i < op.length; i++) {
      s = s.add("agg_" + i, DataTypes.LongType, op[i] != COUNT);
    }
    return s;
  }

  @Override
  public String toString() {
    return text;
  }

  /** A partition's partial results. */
  final class State {
    private final long[] value = new long[op.length];
    private final boolean[] seen = new boolean[op.length];

    /** One row, and its seq (hasSeq false: null). */
    void add(boolean hasSeq, long v) {
      for (int i = 0; i < op.length; i++) {
        if (of[i] == ROW) {
          value[i]++;
          continue;
        }
        if (!hasSeq) {
          continue;
        }
        if (!seen[i]) {
          value[i] = v;
          seen[i] = true;
        } else if (op[i] == MIN) {
          value[i] = Math.min(value[i], v);
        } else {
          value[i] = Math.max(value[i], v);
        }
      }
    }

    /** The one-row batch of the results (null where no row had a value; a count is never null). */
    ColumnarBatch batch() {
      StructType s = schema();
      OnHeapColumnVector[] vs = OnHeapColumnVector.allocateColumns(1, s);
      for (int i = 0; i < op.length; i++) {
        if (op[i] != COUNT && !seen[i]) {
          vs[i].putNull(0);
        } else {
          vs[i].putLong(0, value[i]);
        }
      }
      ColumnarBatch b = new ColumnarBatch(vs);
      b.setNumRows(1);
      return b;
    }
  }
}
