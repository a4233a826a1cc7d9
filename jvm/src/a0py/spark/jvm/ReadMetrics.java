package a0py.spark.jvm;

import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomSumMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;

/**
 * What a scan read from disk, shown with the scan in Spark's plan (and UI):
 * the bytes of the chunk records (and message regions) read, and how many.
 * Spark makes the driver-side classes by reflection: public, no-argument.
 */
public final class ReadMetrics {
  static final String BYTES = "chunkBytesRead";
  static final String CHUNKS = "chunksRead";

  private ReadMetrics() {}

  public static final class Bytes extends CustomSumMetric {
    @Override
    public String name() {
      return BYTES;
    }

    @Override
    public String description() {
      return "bytes of MCAP chunks read";
    }
  }

  public static final class Chunks extends CustomSumMetric {
    @Override
    public String name() {
      return CHUNKS;
    }

    @Override
    public String description() {
      return "MCAP chunks read";
    }
  }

  static CustomMetric[] supported() {
    return new CustomMetric[] {new Bytes(), new Chunks()};
  }

  static CustomTaskMetric task(String name, long value) {
    return new CustomTaskMetric() {
      @Override
      public String name() {
        return name;
      }

      @Override
      public long value() {
        return value;
      }
    };
  }
}
