package a0py.spark.jvm;

import java.io.Serializable;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/** The a0 source's options, read as the Python source reads them (names case-insensitive). */
final class ReadOptions implements Serializable {
  private static final long serialVersionUID = 1L;
  static final long DEFAULT_PARTITION_BYTES = 32L << 20;
  private static final Set<String> KNOWN = new HashSet<>(Arrays.asList(
      "path", "paths", "gaps", "payload", "payloadschema", "maxpartitionbytes", "validatecrc", "topics",
      "startingoffsets", "failondataloss", "maxframespertrigger", "root", "recordtime", "headers", "decode",
      "mcapcolumns", "maxfilespertrigger", "readunfinishedafter", "pushaggregates"));

  final boolean gaps;
  final boolean validateCrc;
  final boolean recordTime;
  final boolean headers;
  /** Option decode: the message and decode_error columns (ROS 2 messages the JVM decodes, see RosDecode). */
  final boolean decode;
  final long partitionBytes;
  final Set<String> topics; // the topics option, null when absent
  /** Option pushAggregates (true): count(*) and min/max(seq) without GROUP BY computed by the reader. */
  final boolean pushAggregates;
  /** Option mcapColumns: null for auto (decided from the channels a read selects), else true or false. */
  final Boolean mcapColumns;

  ReadOptions(Map<String, String> options) {
    for (String k : options.keySet()) {
      if (!KNOWN.contains(k.toLowerCase(Locale.ROOT))) {
        throw new RecordingOptionException("unknown option '" + k + "' of the a0 source; known: gaps, payload, "
            + "payloadSchema, maxPartitionBytes, validateCrc, recordTime, headers, root, topics, decode, mcapColumns, "
            + "startingOffsets, failOnDataLoss, maxFramesPerTrigger, maxFilesPerTrigger, readUnfinishedAfter, "
            + "pushAggregates");
      }
    }
    String payload = get(options, "payload");
    if (payload != null && !payload.toLowerCase(Locale.ROOT).equals("binary")) {
      if (payload.toLowerCase(Locale.ROOT).equals("json")) {
        throw new RecordingOptionException("option payload=json is read by the Python a0 source only: parse the "
            + "binary payload with from_json, or read through a session without the a0py jar");
      }
      throw new RecordingOptionException("option payload='" + payload + "': use binary or json");
    }
    decode = bool(options, "decode", false);
    String mc = get(options, "mcapcolumns");
    String mcs = mc == null ? "auto" : mc.trim().toLowerCase(Locale.ROOT);
    if (mcs.equals("auto")) {
      mcapColumns = null;
    } else if (mcs.equals("true") || mcs.equals("false")) {
      mcapColumns = mcs.equals("true");
    } else {
      throw new RecordingOptionException("option mcapColumns='" + mc + "': use auto, true or false");
    }
    gaps = bool(options, "gaps", false);
    validateCrc = bool(options, "validatecrc", true);
    recordTime = bool(options, "recordtime", false);
    headers = bool(options, "headers", true);
    pushAggregates = bool(options, "pushaggregates", true);
    String n = get(options, "maxpartitionbytes");
    if (n == null) {
      partitionBytes = DEFAULT_PARTITION_BYTES;
    } else {
      long v;
      try {
        v = Long.parseLong(n.trim());
      } catch (NumberFormatException e) {
        throw new RecordingOptionException("option maxpartitionbytes='" + n + "': use an integer");
      }
      if (v < 1) {
        throw new RecordingOptionException("option maxpartitionbytes=" + v + ": use at least 1");
      }
      partitionBytes = v;
    }
    String t = get(options, "topics");
    Set<String> ts = new HashSet<>();
    if (t != null) {
      for (String s : t.split(",")) {
        if (!s.trim().isEmpty()) {
          ts.add(s.trim());
        }
      }
    }
    topics = ts.isEmpty() ? null : ts;
  }

  static String get(Map<String, String> options, String name) {
    for (Map.Entry<String, String> e : options.entrySet()) {
      if (e.getKey().equalsIgnoreCase(name)) {
        return e.getValue();
      }
    }
    return null;
  }

  static boolean bool(Map<String, String> options, String name, boolean dflt) {
    String v = get(options, name);
    if (v == null) {
      return dflt;
    }
    String s = v.trim().toLowerCase(Locale.ROOT);
    if (s.equals("true") || s.equals("1") || s.equals("yes")) {
      return true;
    }
    if (s.equals("false") || s.equals("0") || s.equals("no")) {
      return false;
    }
    throw new RecordingOptionException("option " + name + "='" + v + "': use true or false");
  }

  /**
   * The rows' schema: the Python source's, column for column; {@code mcap} adds the MCAP columns
   * (log_time, publish_time, sequence, schema_name, message_encoding) after payload, a
   * {@code message} type (decode=true) the columns message and decode_error after them.
   */
  StructType schema(boolean mcap, StructType message) {
    StructType s = new StructType()
        .add("topic", DataTypes.StringType)
        .add("seq", DataTypes.LongType)
        .add("time_mono", DataTypes.LongType)
        .add("time_wall", DataTypes.TimestampType);
    if (headers) {
      s = s.add(new StructField("headers", DataTypes.createMapType(DataTypes.StringType, DataTypes.StringType, true),
          true, Metadata.empty()));
    }
    s = s.add("payload", DataTypes.BinaryType);
    if (mcap) {
      s = s.add("log_time", DataTypes.TimestampType).add("publish_time", DataTypes.TimestampType)
          .add("sequence", DataTypes.LongType).add("schema_name", DataTypes.StringType)
          .add("message_encoding", DataTypes.StringType);
    }
    if (message != null) {
      s = s.add("message", message).add("decode_error", DataTypes.StringType);
    }
    if (gaps) {
      s = s.add("is_gap", DataTypes.BooleanType).add("gap_first", DataTypes.LongType)
          .add("gap_last", DataTypes.LongType);
    }
    if (recordTime) {
      s = s.add("time_record", DataTypes.TimestampType);
    }
    return s;
  }
}
