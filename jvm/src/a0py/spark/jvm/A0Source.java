package a0py.spark.jvm;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Collections;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The {@code a0} format in the JVM: a0py recordings (MCAP) as Spark rows, read
 * by a DataSource V2 with columnar partitions, so no row crosses from a Python
 * worker. Same schema, options and rows as the Python source
 * (a0py/spark/datasource.py).
 *
 * <p>Spark resolves the short name "a0" to this class whenever the jar is on
 * the classpath (a JVM DataSourceRegister is found before a Python data
 * source of the same name). What only the Python source reads — live topics
 * ({@code shm://}), file arenas, JSON payloads, decoded messages
 * ({@code decode=true}) other than ROS 2 ones (RosDecode), a user schema
 * other than the rows' own, and streams — is handed to the Python source
 * registered as "a0"
 * (through Spark's own PythonDataSourceV2), so one name serves every read.
 */
public final class A0Source implements TableProvider, DataSourceRegister {
  private static final byte[] MCAP_MAGIC = McapRecords.MAGIC;

  @Override
  public String shortName() {
    return "a0";
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  static PythonDataSourceV2 python() {
    PythonDataSourceV2 p = new PythonDataSourceV2();
    p.setShortName("a0");
    return p;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    if (needsPython(options)) {
      return python().inferSchema(options);
    }
    return A0Scan.schemaFor(options.asCaseSensitiveMap());
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    Map<String, String> options = new HashMap<>(properties);
    if (needsPython(options) || (schema != null && !schema.equals(A0Scan.schemaFor(options)))) {
      return python().getTable(schema, partitioning, properties);
    }
    return new A0Table(options, schema, partitioning);
  }

  /** Does this read need the Python source (live topics, arenas, JSON payloads, decoded non-ROS 2 messages)? */
  static boolean needsPython(Map<String, String> options) {
    String payload = ReadOptions.get(options, "payload");
    if (payload != null && !payload.trim().toLowerCase(Locale.ROOT).equals("binary")) {
      return true;
    }
    try {
      if (ReadOptions.bool(options, "decode", false)
          && RosDecode.messageType(options, new ReadOptions(options)) == null) {
        return true; // decoded by the Python source (RosDecode says which reads the JVM decodes)
      }
    } catch (RecordingOptionException e) {
      return false; // reported by the reader
    }
    List<String> paths;
    try {
      paths = A0Scan.paths(options);
    } catch (RecordingOptionException e) {
      return false; // reported by the reader
    }
    for (String p : paths) {
      if (p.startsWith("shm://")) {
        return true;
      }
    }
    List<String> files;
    try {
      files = A0Scan.expandPaths(paths);
    } catch (RecordingOptionException e) {
      return false;
    }
    for (String f : files) {
      if (isArenaFile(f)) {
        return true;
      }
    }
    return false;
  }

  /** A file that starts with a0py's arena magic, not MCAP's. */
  private static boolean isArenaFile(String path) {
    if (!Files.isRegularFile(Paths.get(path))) {
      return false;
    }
    try (FileChannel ch = McapLayout.open(path)) {
      byte[] head = McapLayout.pread(ch, MCAP_MAGIC.length, 0, path);
      return head.length == MCAP_MAGIC.length && !Arrays.equals(head, MCAP_MAGIC)
          && LittleEndian.le64(head, 0) == 0x4e45524159503041L;
    } catch (IOException | RuntimeException e) {
      return false;
    }
  }

  static final class A0Table implements SupportsRead {
    private final Map<String, String> options;
    private final StructType schema;
    private final Transform[] partitioning;

    A0Table(Map<String, String> options, StructType schema, Transform[] partitioning) {
      this.options = options;
      this.schema = schema != null ? schema : A0Scan.schemaFor(options);
      this.partitioning = partitioning;
    }

    @Override
    public String name() {
      return "a0";
    }

    @Override
    @SuppressWarnings("deprecation") // columns() is derived from it by default
    public StructType schema() {
      return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      // Streams are the Python source's: the scan hands them over (A0Scan.toMicroBatchStream).
      return Collections.unmodifiableSet(EnumSet.of(TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ));
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap scanOptions) {
      Map<String, String> all = new HashMap<>(options);
      all.putAll(scanOptions.asCaseSensitiveMap());
      return new A0Scan.Builder(all, () -> ((SupportsRead) python().getTable(schema, partitioning, options))
          .newScanBuilder(scanOptions));
    }
  }
}
