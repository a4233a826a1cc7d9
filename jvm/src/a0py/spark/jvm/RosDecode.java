package a0py.spark.jvm;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.types.StructType;

/**
 * Which {@code decode=true} reads the JVM reader decodes itself: those whose
 * selected channels (after option {@code topics}) that a0py did not write are
 * all ROS 2 messages ({@code cdr} with a {@code ros2msg} schema) of one schema
 * name, whose definitions {@link RosMsg} parses to one Spark type. Every other
 * {@code decode=true} read (other encodings, {@code ros2idl}, typed a0py
 * topics, several types, a definition the JVM is not sure of, and every read
 * the Python source would refuse) goes to the Python source, which decodes it
 * or says why not.
 */
final class RosDecode {
  static final String ENCODING = "cdr";
  static final String SCHEMA_ENCODING = "ros2msg";

  private RosDecode() {}

  /** Parsed definitions by (schema name, schema data): a few per session. */
  private static final Map<String, Object> PARSED = new HashMap<>();

  /** The parsed definitions of a schema, or null when the JVM does not decode it. */
  static Map<String, List<RosMsg.Field>> types(String schemaName, byte[] data) {
    String key = schemaName + "\0" + new String(data, java.nio.charset.StandardCharsets.ISO_8859_1);
    synchronized (PARSED) {
      Object hit = PARSED.get(key);
      if (hit != null) {
        return hit == Boolean.FALSE ? null : castTypes(hit);
      }
    }
    Object parsed;
    try {
      parsed = RosMsg.parse(schemaName, data);
    } catch (RosMsg.Unsupported e) {
      parsed = Boolean.FALSE;
    }
    synchronized (PARSED) {
      if (PARSED.size() > 256) {
        PARSED.clear();
      }
      PARSED.put(key, parsed);
    }
    return parsed == Boolean.FALSE ? null : castTypes(parsed);
  }

  @SuppressWarnings("unchecked")
  private static Map<String, List<RosMsg.Field>> castTypes(Object o) {
    return (Map<String, List<RosMsg.Field>>) o;
  }

  /** Does the JVM decode channel {@code ch} of {@code lay}? (A ROS 2 channel whose definition parses.) */
  static boolean decodes(McapLayout lay, McapLayout.Channel ch) {
    return ENCODING.equals(ch.encoding) && ch.schemaId != 0
        && SCHEMA_ENCODING.equals(lay.schemaEncodings.get(ch.schemaId))
        && types(lay.schemas.get(ch.schemaId), lay.schemaData.get(ch.schemaId)) != null;
  }

  /**
   * The Spark type of the {@code message} column of a decode=true read, or null when the read is
   * the Python source's (see the class).
   */
  static StructType messageType(Map<String, String> options, ReadOptions read) {
    List<String> files;
    try {
      files = A0Scan.expandPaths(A0Scan.paths(options));
    } catch (RuntimeException e) {
      return null;
    }
    String name = null;
    StructType type = null;
    for (String f : files) {
      McapLayout lay;
      try {
        if (McapLayout.noRecordYet(f) != null) {
          continue;
        }
        lay = McapLayout.cached(f);
      } catch (RuntimeException e) {
        return null;
      }
      for (McapLayout.Channel ch : lay.channels.values()) {
        byte k = A0Scan.kindOf(ch);
        if (k != A0Scan.KIND_FOREIGN && k != A0Scan.KIND_TYPED) {
          continue;
        }
        if (read.topics != null && !read.topics.contains(A0Scan.rowTopic(ch, k))) {
          continue;
        }
        if (k == A0Scan.KIND_TYPED || !decodes(lay, ch)) {
          return null;
        }
        String n = lay.schemas.get(ch.schemaId);
        StructType t = CdrDecoder.sparkType(types(n, lay.schemaData.get(ch.schemaId)));
        if ((name != null && !name.equals(n)) || (type != null && !type.equals(t))) {
          return null; // several types: the Python source names them
        }
        name = n;
        type = t;
      }
    }
    return type;
  }
}
