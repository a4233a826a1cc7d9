package a0py.spark.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.Serializable;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.PathMatcher;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.EqualNullSafe;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.types.StructType;

/**
 * Planning a read: the scan builder (filter pushdown on topic, seq,
 * time_wall and log_time, column pruning), the scan, and its partitions — one per run of
 * chunks of about maxPartitionBytes uncompressed bytes, as the Python
 * source plans them (a0py/spark/planning.py {@code plan}).
 *
 * <p>Pushed filters are applied exactly by the reader, so they are not
 * evaluated again by Spark; chunks are skipped only where the summary's
 * message index, the segment's a0py.chunks metadata (seq and publish
 * times of a0py's channels) or the chunk index's log-time range proves no
 * row in them can pass.
 */
final class A0Scan implements Scan, Batch {
  static final byte KIND_PACKET = 1;
  static final byte KIND_GAP = 2;
  /** A typed topic's headers channel (/a0py/headers/T): its packets cut at the payload, never rows. */
  static final byte KIND_HEADERS = 3;
  /** A typed topic's payload channel: rows joined with the headers channel's messages by sequence. */
  static final byte KIND_TYPED = 4;
  /** Any other channel (any encoding, any schema or none): rows of the message as recorded. */
  static final byte KIND_FOREIGN = 5;
  static final String PACKET_ENCODING = "a0py/packet";
  static final String PACKET_SCHEMA = "a0py.Packet";
  static final String GAP_TOPIC = "/a0py/gaps";
  static final String JSON_TOPIC_PREFIX = "/a0py/json/";
  static final String TOPIC_KEY = "a0py.topic";
  static final String HEADERS_KEY = "a0py.headers";
  static final String PAYLOADS_KEY = "a0py.payloads";
  /** How many chunks near a typed chunk are searched for its headers messages. */
  static final int COMPANIONS = 4;
  /** How many chunks on each side of a typed chunk are looked at for them. */
  static final int NEAR_SCAN = 32;

  static final class Builder implements ScanBuilder, SupportsPushDownFilters, SupportsPushDownRequiredColumns,
      org.apache.spark.sql.connector.read.SupportsPushDownAggregates {
    private final Map<String, String> options;
    private final ReadOptions read;
    private Predicate predicate = new Predicate();
    private StructType schema;
    private Filter[] pushed = new Filter[0];
    private Aggregates aggregates; // pushed aggregates, or null
    private final java.util.function.Supplier<ScanBuilder> python;

    Builder(Map<String, String> options, java.util.function.Supplier<ScanBuilder> python) {
      this.options = options;
      this.python = python;
      this.read = new ReadOptions(options);
      this.schema = schemaFor(options, read);
      if (read.topics != null) {
        predicate = predicate.andTopics(read.topics);
      }
    }

    @Override
    public Filter[] pushFilters(Filter[] filters) {
      List<Filter> rest = new ArrayList<>();
      List<Filter> taken = new ArrayList<>();
      for (Filter f : filters) {
        Predicate p = narrow(predicate, f);
        if (p == null) {
          rest.add(f);
        } else {
          predicate = p;
          taken.add(f);
        }
      }
      pushed = taken.toArray(new Filter[0]);
      return rest.toArray(new Filter[0]);
    }

    @Override
    public Filter[] pushedFilters() {
      return pushed;
    }

    @Override
    public void pruneColumns(StructType required) {
      schema = required;
    }

    /** Aggregates the reader computes from the records (see {@link Aggregates}), unless pushAggregates=false. */
    @Override
    public boolean pushAggregation(org.apache.spark.sql.connector.expressions.aggregate.Aggregation a) {
      aggregates = read.pushAggregates ? Aggregates.of(a) : null;
      return aggregates != null;
    }

    @Override
    public Scan build() {
      return new A0Scan(options, read, predicate, schema, aggregates, python);
    }
  }

  private final Map<String, String> options;
  private final ReadOptions read;
  private final Predicate predicate;
  private final StructType schema;
  private final Aggregates aggregates; // pushed aggregates (the scan's rows are their partial results), or null
  private final java.util.function.Supplier<ScanBuilder> python;

  A0Scan(Map<String, String> options, ReadOptions read, Predicate predicate, StructType schema, Aggregates aggregates,
      java.util.function.Supplier<ScanBuilder> python) {
    this.python = python;
    this.aggregates = aggregates;
    this.options = options;
    this.read = read;
    this.predicate = predicate;
    this.schema = schema;
  }

  @Override
  public StructType readSchema() {
    return aggregates != null ? aggregates.schema() : schema;
  }

  @Override
  public String description() {
    String where;
    try {
      where = String.join(", ", paths(options));
    } catch (RecordingOptionException e) {
      where = "(no path)";
    }
    return "a0 (JVM) [" + where + "]" + (aggregates != null ? " aggregates [" + aggregates + "]" : "");
  }

  @Override
  public org.apache.spark.sql.connector.metric.CustomMetric[] supportedCustomMetrics() {
    return ReadMetrics.supported();
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  /** Streams of live topics are the Python source's (a0py/spark/topic_stream.py). */
  @Override
  public org.apache.spark.sql.connector.read.streaming.MicroBatchStream toMicroBatchStream(String checkpoint) {
    return python.get().build().toMicroBatchStream(checkpoint);
  }

  @Override
  public InputPartition[] planInputPartitions() {
    int parallelism;
    try {
      parallelism = org.apache.spark.sql.SparkSession.active().sparkContext().defaultParallelism();
    } catch (IllegalStateException e) { // no session here: partitions of maxPartitionBytes, not rounded
      parallelism = 1;
    }
    List<Partition> parts = PartitionPlan.plan(paths(options), predicate, read, parallelism);
    return parts.toArray(new InputPartition[0]);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new A0PartitionReader.Factory(read, predicate, aggregates != null ? new StructType() : schema, aggregates);
  }

  // -- filters ------------------------------------------------------------------

  static Predicate narrow(Predicate p, Filter f) {
    if (f instanceof org.apache.spark.sql.sources.IsNotNull) { // what Spark adds beside a comparison
      String c = ((org.apache.spark.sql.sources.IsNotNull) f).attribute();
      // a topic is never null; a seq is null on foreign rows only, which any seq bound leaves out
      return c.equals("topic") ? p : c.equals("seq") ? p.andSeq(Long.MIN_VALUE, null, null) : null;
    }
    String col;
    Object value;
    if (f instanceof EqualTo) {
      col = ((EqualTo) f).attribute();
      value = ((EqualTo) f).value();
    } else if (f instanceof EqualNullSafe) {
      col = ((EqualNullSafe) f).attribute();
      value = ((EqualNullSafe) f).value();
    } else if (f instanceof GreaterThan) {
      col = ((GreaterThan) f).attribute();
      value = ((GreaterThan) f).value();
    } else if (f instanceof GreaterThanOrEqual) {
      col = ((GreaterThanOrEqual) f).attribute();
      value = ((GreaterThanOrEqual) f).value();
    } else if (f instanceof LessThan) {
      col = ((LessThan) f).attribute();
      value = ((LessThan) f).value();
    } else if (f instanceof LessThanOrEqual) {
      col = ((LessThanOrEqual) f).attribute();
      value = ((LessThanOrEqual) f).value();
    } else if (f instanceof In) {
      col = ((In) f).attribute();
      value = ((In) f).values();
    } else {
      return null;
    }
    boolean eq = f instanceof EqualTo || f instanceof EqualNullSafe;
    if (col.equals("topic")) {
      Set<String> ts = new HashSet<>();
      for (Object v : f instanceof In ? (Object[]) value : eq ? new Object[] {value} : new Object[0]) {
        if (!(v instanceof String)) {
          return null;
        }
        ts.add((String) v);
      }
      return ts.isEmpty() && !(f instanceof In) ? null : p.andTopics(ts);
    }
    if (col.equals("seq")) {
      if (f instanceof In) {
        Set<Long> vs = new HashSet<>();
        for (Object v : (Object[]) value) {
          Long l = asLong(v);
          if (l == null) {
            return null;
          }
          vs.add(l);
        }
        return p.andSeq(null, null, vs);
      }
      Long v = asLong(value);
      return v == null ? null : bound(f, v, eq, (lo, hi) -> p.andSeq(lo, hi, null));
    }
    if (col.equals("time_wall") && !(f instanceof In)) {
      Long us = micros(value);
      return us == null ? null : bound(f, us, eq, p::andWall);
    }
    if (col.equals("log_time") && !(f instanceof In)) {
      Long us = micros(value);
      return us == null ? null : bound(f, us, eq, p::andLog);
    }
    return null;
  }

  private interface Bounds {
    Predicate and(Long lo, Long hi);
  }

  private static Predicate bound(Filter f, long v, boolean eq, Bounds b) {
    if (eq) {
      return b.and(v, v);
    }
    if (f instanceof GreaterThan) {
      return v == Long.MAX_VALUE ? b.and(1L, 0L) : b.and(v + 1, null);
    }
    if (f instanceof GreaterThanOrEqual) {
      return b.and(v, null);
    }
    if (f instanceof LessThan) {
      return v == Long.MIN_VALUE ? b.and(1L, 0L) : b.and(null, v - 1);
    }
    return b.and(null, v);
  }

  private static Long asLong(Object v) {
    if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
      return ((Number) v).longValue();
    }
    return null;
  }

  private static Long micros(Object v) {
    if (v instanceof java.sql.Timestamp) {
      java.sql.Timestamp t = (java.sql.Timestamp) v;
      return Math.floorDiv(t.getTime(), 1000L) * 1_000_000L + t.getNanos() / 1000;
    }
    if (v instanceof java.time.Instant) {
      java.time.Instant i = (java.time.Instant) v;
      return i.getEpochSecond() * 1_000_000L + i.getNano() / 1000;
    }
    return null;
  }

  // -- paths and planning -------------------------------------------------------------

  static List<String> paths(Map<String, String> options) {
    String many = ReadOptions.get(options, "paths");
    List<String> out = new ArrayList<>();
    if (many != null && !many.isEmpty()) {
      try {
        JsonNode n = new ObjectMapper().readTree(many);
        if (n.isArray()) {
          n.forEach(x -> out.add(x.asText()));
        } else {
          out.add(n.asText());
        }
      } catch (IOException e) {
        for (String s : many.split(",")) {
          if (!s.isEmpty()) {
            out.add(s);
          }
        }
      }
      if (!out.isEmpty()) {
        return out;
      }
    }
    String one = ReadOptions.get(options, "path");
    if (one == null || one.isEmpty()) {
      throw new RecordingOptionException("the a0 source needs a path: spark.read.format('a0').load(PATH) "
          + "(a recording, a directory, a glob, a file arena or shm://TOPIC)");
    }
    out.add(one);
    return out;
  }

  static List<String> expandPaths(List<String> spec) {
    Set<String> seen = new LinkedHashSet<>();
    List<String> out = new ArrayList<>();
    for (String item : spec) {
      if (item.startsWith("shm://")) {
        throw new RecordingOptionException(item + ": live topics are read by the Python a0 source; read them "
            + "through a session without the a0py jar");
      }
      String local = item.startsWith("file://") ? item.substring(7) : item.startsWith("file:") ? item.substring(5)
          : item;
      Path p = Paths.get(local);
      List<String> found;
      try {
        if (Files.isDirectory(p)) {
          found = directory(p);
        } else if (Files.exists(p)) {
          found = List.of(local);
        } else if (local.matches(".*[*?\\[].*")) {
          found = glob(local);
          if (found.isEmpty()) {
            throw new RecordingOptionException(item + ": the pattern matches no file");
          }
        } else {
          throw new RecordingOptionException(item + ": no such file or directory (a recording, a directory of "
              + "recordings, a glob, a file arena or shm://TOPIC)");
        }
        for (String f : found) {
          if (seen.add(Paths.get(f).toRealPath().toString())) {
            out.add(f);
          }
        }
      } catch (IOException e) {
        throw new RecordingOptionException(item + ": " + e);
      }
    }
    return out;
  }

  /**
   * The recordings of a directory: its *.mcap files (recursively, by name), where a rosbag2
   * directory (one with a metadata.yaml) gives its files in the metadata's order.
   */
  private static List<String> directory(Path dir) throws IOException {
    List<Path> all;
    try (Stream<Path> s = Files.walk(dir)) {
      all = s.filter(Files::isRegularFile).sorted().collect(Collectors.toList());
    }
    List<Path> bags = new ArrayList<>();
    for (Path f : all) {
      if (f.getFileName().toString().equals("metadata.yaml")) {
        bags.add(f.getParent());
      }
    }
    List<String> out = new ArrayList<>();
    for (Path f : all) {
      if (f.toString().endsWith(".mcap") && bags.stream().noneMatch(b -> f.startsWith(b))) {
        out.add(f.toString());
      }
    }
    for (Path b : bags) {
      out.addAll(bagFiles(b));
    }
    return out;
  }

  /** The MCAP files of rosbag2 directory {@code bag}, in its metadata.yaml's order. */
  static List<String> bagFiles(Path bag) {
    JsonNode info;
    try {
      info = new ObjectMapper(new com.fasterxml.jackson.dataformat.yaml.YAMLFactory())
          .readTree(bag.resolve("metadata.yaml").toFile()).path("rosbag2_bagfile_information");
    } catch (IOException | RuntimeException e) {
      throw new RecordingOptionException(bag + ": a rosbag2 directory whose metadata.yaml does not parse (" + e
          .getMessage() + ")");
    }
    String storage = info.path("storage_identifier").asText("");
    if (!storage.isEmpty() && !storage.equals("mcap")) {
      throw new RecordingOptionException(bag + ": a rosbag2 directory with " + storage + " storage: a0py reads "
          + "bags stored as MCAP (convert it with `ros2 bag convert`)");
    }
    String comp = info.path("compression_mode").asText("");
    if (!comp.isEmpty() && !comp.equalsIgnoreCase("none")) {
      throw new RecordingOptionException(bag + ": a rosbag2 directory with compression mode " + comp + " ("
          + info.path("compression_format").asText("") + "): a0py reads bags without bag-level compression "
          + "(MCAP's own chunk compression is fine)");
    }
    List<String> out = new ArrayList<>();
    for (JsonNode f : info.path("relative_file_paths")) {
      Path file = bag.resolve(f.asText()).normalize();
      if (!file.startsWith(bag.normalize()) || !Files.isRegularFile(file)) {
        throw new RecordingOptionException(bag + ": metadata.yaml names " + f.asText() + ", not a file of the bag");
      }
      if (file.toString().endsWith(".mcap")) {
        out.add(file.toString());
      }
    }
    return out;
  }

  private static List<String> glob(String pattern) throws IOException {
    Path abs = Paths.get(pattern).toAbsolutePath();
    Path root = abs.getRoot();
    for (Path part : abs) {
      if (part.toString().matches(".*[*?\\[].*")) {
        break;
      }
      root = root.resolve(part);
    }
    if (!Files.isDirectory(root)) {
      return List.of();
    }
    PathMatcher m = FileSystems.getDefault().getPathMatcher("glob:" + abs);
    boolean relative = !Paths.get(pattern).isAbsolute();
    Path cwd = Paths.get("").toAbsolutePath();
    try (Stream<Path> s = Files.walk(root)) {
      return s.filter(Files::isRegularFile).filter(m::matches)
          .map(x -> relative ? cwd.relativize(x).toString() : x.toString()).sorted().collect(Collectors.toList());
    }
  }

  /** One part of the read: runs of chunks of one or more files. */
  static final class Partition implements InputPartition {
    private static final long serialVersionUID = 1L;
    final List<Slice> slices = new ArrayList<>();
    long weight;
  }

  /** Some chunks of one file, with the channels known when it was planned. */
  static final class Slice implements Serializable {
    private static final long serialVersionUID = 1L;
    final String path;
    final int[] channelIds;
    final String[] topics; // the rows' topic: the channel's, a typed channel's a0py topic
    final byte[] kinds;
    final String[] schemaNames; // null where the channel has no schema
    final String[] encodings;
    final int[] headerIds; // a typed channel's headers channel, else -1
    final McapLayout.Ref[] refs;
    final McapLayout.Ref[][] companions; // per ref: nearby chunks that may hold its typed rows' headers
    final byte[][] decodeSchemas; // decode=true: the ros2msg definition of each channel decoded, else null

    Slice(String path, Channels c, McapLayout.Ref[] refs, McapLayout.Ref[][] companions) {
      this.path = path;
      this.channelIds = c.ids;
      this.topics = c.topics;
      this.kinds = c.kinds;
      this.schemaNames = c.schemaNames;
      this.encodings = c.encodings;
      this.headerIds = c.headerIds;
      this.refs = refs;
      this.companions = companions;
      this.decodeSchemas = c.decodeSchemas;
    }
  }

  /** The channels of one file that the reader knows (all but JSON copies), as parallel arrays. */
  static final class Channels {
    int[] ids;
    String[] topics;
    byte[] kinds;
    String[] schemaNames;
    String[] encodings;
    int[] headerIds;
    byte[][] decodeSchemas;

    Channels(McapLayout lay) {
      this(lay, false);
    }

    Channels(McapLayout lay, boolean decode) {
      List<McapLayout.Channel> known = new ArrayList<>();
      for (McapLayout.Channel ch : lay.channels.values()) {
        if (kindOf(ch) != 0) {
          known.add(ch);
        }
      }
      int n = known.size();
      ids = new int[n];
      topics = new String[n];
      kinds = new byte[n];
      schemaNames = new String[n];
      encodings = new String[n];
      headerIds = new int[n];
      decodeSchemas = new byte[n][];
      for (int i = 0; i < n; i++) {
        McapLayout.Channel ch = known.get(i);
        ids[i] = ch.id;
        kinds[i] = kindOf(ch);
        topics[i] = rowTopic(ch, kinds[i]);
        schemaNames[i] = ch.schemaId == 0 ? null : lay.schemas.get(ch.schemaId);
        encodings[i] = ch.encoding;
        headerIds[i] = kinds[i] == KIND_TYPED ? headersChannel(lay, ch) : -1;
        if (decode && kinds[i] == KIND_FOREIGN && RosDecode.decodes(lay, ch)) {
          decodeSchemas[i] = lay.schemaData.get(ch.schemaId);
        }
      }
    }
  }

  /** The kind of a channel (format.channel_kind's rule), 0 for a JSON copy (never read: it repeats packet rows). */
  static byte kindOf(McapLayout.Channel ch) {
    if (ch.metadata.containsKey(PAYLOADS_KEY)) {
      return KIND_HEADERS; // in its payloads' family (HeadersMessage), or a0py packets
    }
    if (PACKET_ENCODING.equals(ch.encoding)) {
      return KIND_PACKET;
    }
    if (ch.metadata.containsKey(HEADERS_KEY)) {
      return KIND_TYPED;
    }
    if (GAP_TOPIC.equals(ch.topic) && "json".equals(ch.encoding)) {
      return KIND_GAP;
    }
    if (ch.topic.startsWith(JSON_TOPIC_PREFIX) && "json".equals(ch.encoding) && ch.metadata.containsKey(TOPIC_KEY)) {
      return 0;
    }
    return KIND_FOREIGN;
  }

  /** The topic of a channel's rows: a typed channel's a0py topic, any other channel's own. */
  static String rowTopic(McapLayout.Channel ch, byte kind) {
    if (kind == KIND_TYPED) {
      String t = ch.metadata.get(TOPIC_KEY);
      return t == null || t.isEmpty() ? ch.topic : t;
    }
    return ch.topic;
  }

  /** The id of typed channel {@code ch}'s headers channel, -1 when the file has none. */
  static int headersChannel(McapLayout lay, McapLayout.Channel ch) {
    String topic = ch.metadata.get(HEADERS_KEY);
    for (McapLayout.Channel h : lay.channels.values()) {
      if (h.topic.equals(topic) && kindOf(h) == KIND_HEADERS) {
        return h.id;
      }
    }
    return -1;
  }

  /**
   * The schema of a read: today's columns, plus the MCAP columns when option mcapColumns is true or,
   * with auto, when the read selects (after option topics) a foreign or typed channel of any of its
   * files (from their summaries; a scan for a file without one).
   */
  static StructType schemaFor(Map<String, String> options) {
    ReadOptions read = new ReadOptions(options);
    return schemaFor(options, read);
  }

  static StructType schemaFor(Map<String, String> options, ReadOptions read) {
    StructType message = null;
    if (read.decode) {
      message = RosDecode.messageType(options, read);
      if (message == null) { // A0Source hands such reads to the Python source
        throw new RecordingOptionException("option decode=true: the JVM reader decodes ROS 2 messages (cdr with "
            + "ros2msg schemas) of one type; this read is the Python a0 source's");
      }
    }
    return read.schema(read.mcapColumns != null ? read.mcapColumns : selectsMcapChannels(options, read), message);
  }

  private static boolean selectsMcapChannels(Map<String, String> options, ReadOptions read) {
    List<String> files;
    try {
      files = expandPaths(paths(options));
    } catch (RecordingOptionException e) {
      return false; // reported when the read is planned
    }
    for (String f : files) {
      McapLayout lay;
      try {
        if (McapLayout.noRecordYet(f) != null) {
          continue;
        }
        lay = McapLayout.cached(f);
      } catch (RuntimeException e) {
        continue; // a damaged file: reported when the read is planned
      }
      for (McapLayout.Channel ch : lay.channels.values()) {
        byte k = kindOf(ch);
        if ((k == KIND_FOREIGN || k == KIND_TYPED) && (read.topics == null || read.topics.contains(rowTopic(ch, k)))) {
          return true;
        }
      }
    }
    return false;
  }
}
