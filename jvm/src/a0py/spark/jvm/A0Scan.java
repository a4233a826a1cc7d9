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
 * Planning a read: the scan builder (filter pushdown on topic, seq and
 * time_wall, column pruning), the scan, and its partitions — one per run of
 * chunks of about maxPartitionBytes uncompressed bytes, as the Python
 * source plans them (a0py/spark/_read.py {@code plan}).
 *
 * <p>Pushed filters are applied exactly by the reader, so they are not
 * evaluated again by Spark; chunks are skipped only where the summary's
 * message index or the segment's a0py.chunks metadata proves no row in
 * them can pass.
 */
final class A0Scan implements Scan, Batch {
  static final byte KIND_PACKET = 1;
  static final byte KIND_GAP = 2;
  static final String PACKET_ENCODING = "a0py/packet";
  static final String GAP_TOPIC = "/a0py/gaps";

  static final class Builder implements ScanBuilder, SupportsPushDownFilters, SupportsPushDownRequiredColumns {
    private final Map<String, String> options;
    private final ReadOptions read;
    private Predicate predicate = new Predicate();
    private StructType schema;
    private Filter[] pushed = new Filter[0];
    private final java.util.function.Supplier<ScanBuilder> python;

    Builder(Map<String, String> options, java.util.function.Supplier<ScanBuilder> python) {
      this.options = options;
      this.python = python;
      this.read = new ReadOptions(options);
      this.schema = read.schema();
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

    @Override
    public Scan build() {
      return new A0Scan(options, read, predicate, schema, python);
    }
  }

  private final Map<String, String> options;
  private final ReadOptions read;
  private final Predicate predicate;
  private final StructType schema;
  private final java.util.function.Supplier<ScanBuilder> python;

  A0Scan(Map<String, String> options, ReadOptions read, Predicate predicate, StructType schema,
      java.util.function.Supplier<ScanBuilder> python) {
    this.python = python;
    this.options = options;
    this.read = read;
    this.predicate = predicate;
    this.schema = schema;
  }

  @Override
  public StructType readSchema() {
    return schema;
  }

  @Override
  public String description() {
    String where;
    try {
      where = String.join(", ", paths(options));
    } catch (RecordingOptionException e) {
      where = "(no path)";
    }
    return "a0 (JVM) [" + where + "]";
  }

  @Override
  public org.apache.spark.sql.connector.metric.CustomMetric[] supportedCustomMetrics() {
    return ReadMetrics.supported();
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  /** Streams of live topics are the Python source's (a0py/spark/stream.py). */
  @Override
  public org.apache.spark.sql.connector.read.streaming.MicroBatchStream toMicroBatchStream(String checkpoint) {
    return python.get().build().toMicroBatchStream(checkpoint);
  }

  @Override
  public InputPartition[] planInputPartitions() {
    List<Partition> parts = plan(paths(options), predicate, read);
    return parts.toArray(new InputPartition[0]);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new A0PartitionReader.Factory(read, predicate, schema);
  }

  // -- filters ------------------------------------------------------------------

  static Predicate narrow(Predicate p, Filter f) {
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
          try (Stream<Path> s = Files.walk(p)) {
            found = s.filter(Files::isRegularFile).map(Path::toString).filter(x -> x.endsWith(".mcap")).sorted()
                .collect(Collectors.toList());
          }
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
    final String[] topics;
    final byte[] kinds;
    final McapLayout.Ref[] refs;

    Slice(String path, int[] channelIds, String[] topics, byte[] kinds, McapLayout.Ref[] refs) {
      this.path = path;
      this.channelIds = channelIds;
      this.topics = topics;
      this.kinds = kinds;
      this.refs = refs;
    }
  }

  static byte kindOf(McapLayout.Channel ch) {
    if (PACKET_ENCODING.equals(ch.encoding)) {
      return KIND_PACKET;
    }
    if (GAP_TOPIC.equals(ch.topic) && "json".equals(ch.encoding)) {
      return KIND_GAP;
    }
    return 0;
  }

  static List<Partition> plan(List<String> spec, Predicate predicate, ReadOptions read) {
    List<Partition> parts = new ArrayList<>();
    Partition cur = new Partition();
    for (String src : expandPaths(spec)) {
      String empty = McapLayout.noRecordYet(src);
      if (empty != null) {
        System.err.println("a0py: warning: skipping " + empty);
        continue;
      }
      McapLayout lay = McapLayout.read(src);
      List<Integer> ids = new ArrayList<>();
      List<String> topics = new ArrayList<>();
      List<Byte> kinds = new ArrayList<>();
      Set<Integer> wanted = new HashSet<>();
      for (McapLayout.Channel ch : lay.channels.values()) {
        byte k = kindOf(ch);
        if ((k == KIND_PACKET && predicate.topicOk(ch.topic)) || (k == KIND_GAP && read.gaps && !predicate.empty)) {
          wanted.add(ch.id);
        }
        if (k != 0) {
          ids.add(ch.id);
          topics.add(ch.topic);
          kinds.add(k);
        }
      }
      Map<Long, long[][]> meta = chunkMeta(lay);
      List<McapLayout.Ref> refs = new ArrayList<>();
      for (McapLayout.Ref ref : lay.chunks) {
        if (ref.channelIds != null && java.util.Arrays.stream(ref.channelIds).noneMatch(wanted::contains)) {
          continue;
        }
        long[][] info = meta.get(ref.offset);
        if (info != null && info.length > 0) {
          boolean any = false;
          for (long[] i : info) {
            if (wanted.contains((int) i[0]) && predicate.seqRangeOk(i[1], i[2])
                && predicate.wallRangeOk(Math.floorDiv(i[3], 1000L), Math.floorDiv(i[4], 1000L))) {
              any = true;
              break;
            }
          }
          if (!any) {
            continue;
          }
        }
        refs.add(ref);
      }
      refs.addAll(lay.regions);
      if (refs.isEmpty()) {
        continue;
      }
      int[] idArr = ids.stream().mapToInt(Integer::intValue).toArray();
      String[] topicArr = topics.toArray(new String[0]);
      byte[] kindArr = new byte[kinds.size()];
      for (int i = 0; i < kindArr.length; i++) {
        kindArr[i] = kinds.get(i);
      }
      List<McapLayout.Ref> run = new ArrayList<>();
      long runWeight = 0;
      for (McapLayout.Ref ref : refs) {
        long w = ref.uncompressedSize;
        if (!run.isEmpty() && cur.weight + runWeight + w > read.partitionBytes) {
          cur.slices.add(new Slice(src, idArr, topicArr, kindArr, run.toArray(new McapLayout.Ref[0])));
          cur.weight += runWeight;
          parts.add(cur);
          cur = new Partition();
          run = new ArrayList<>();
          runWeight = 0;
        }
        run.add(ref);
        runWeight += w;
      }
      if (!run.isEmpty()) {
        cur.slices.add(new Slice(src, idArr, topicArr, kindArr, run.toArray(new McapLayout.Ref[0])));
        cur.weight += runWeight;
      }
    }
    if (!cur.slices.isEmpty()) {
      parts.add(cur);
    }
    if (parts.isEmpty()) {
      parts.add(new Partition());
    }
    return parts;
  }

  /** chunk offset -> [channel, seq_lo, seq_hi, pub_lo, pub_hi] from a0py.chunks (empty when unreadable). */
  private static Map<Long, long[][]> chunkMeta(McapLayout lay) {
    Map<Long, long[][]> out = new HashMap<>();
    try {
      for (Map.Entry<String, String> e : lay.chunkMeta.entrySet()) {
        List<long[]> items = new ArrayList<>();
        for (String item : e.getValue().split(";")) {
          if (item.isEmpty()) {
            continue;
          }
          String[] f = item.split(":");
          if (f.length != 5) {
            return new HashMap<>();
          }
          long[] v = new long[5];
          for (int i = 0; i < 5; i++) {
            v[i] = Long.parseLong(f[i].trim());
          }
          items.add(v);
        }
        out.put(Long.parseLong(e.getKey().trim()), items.toArray(new long[0][]));
      }
    } catch (NumberFormatException ex) {
      return new HashMap<>();
    }
    return out;
  }
}
