package a0py.spark.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * A message of the gap channel (/a0py/gaps) as its row: frames first..last of
 * topic were evicted before the recorder read them. wallUs and logUs are the
 * record's publish and log times in µs; recordOffset is where its Message
 * record is in the chunk's records.
 */
record GapRow(String topic, long first, long last, long wallUs, long logUs, int recordOffset) {
  private static final ObjectMapper JSON = new ObjectMapper();
  static final GapRow[] NONE = new GapRow[0];

  /** The rows of the gap messages at offs[0, count) of recs that pass the predicate. */
  static GapRow[] of(byte[] recs, int[] offs, int count, String where, Predicate predicate) {
    List<GapRow> out = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      int o = offs[i];
      GapRow g = parse(recs, o, where, i);
      if (predicate.topicOk(g.topic) && predicate.seqOk(g.first) && predicate.wallOk(g.wallUs)
          && predicate.logOk(g.logUs)) {
        out.add(g);
      }
    }
    return out.toArray(NONE);
  }

  private static GapRow parse(byte[] recs, int o, String where, int i) {
    try {
      JsonNode g = JSON.readTree(recs, MessageRecords.data(o), MessageRecords.dataSize(recs, o));
      if (g == null || !g.isObject() || !g.has("topic") || !g.has("first") || !g.has("last")) {
        throw new IOException("not an object with topic, first and last");
      }
      return new GapRow(g.get("topic").asText(), integer(g.get("first")), integer(g.get("last")),
          MessageRecords.wallUs(recs, o), MessageRecords.logUs(recs, o), o);
    } catch (IOException | RuntimeException e) {
      throw new RecordingFormatException(where + ", gap message " + i + ": not a gap record (" + e.getMessage()
          + ")");
    }
  }

  private static long integer(JsonNode n) throws IOException {
    if (n.isIntegralNumber() && n.canConvertToLong()) {
      return n.longValue();
    }
    if (n.isTextual()) {
      try {
        return Long.parseLong(n.asText().trim());
      } catch (NumberFormatException e) {
        throw new IOException("not an integer: " + n);
      }
    }
    throw new IOException("not an integer: " + n);
  }
}
