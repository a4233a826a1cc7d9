package a0py.spark.jvm;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * ROS 2 message definitions in the {@code ros2msg} schema encoding (a type's
 * fields, then each dependency after a line of 80 {@code =} and a
 * {@code MSG: pkg/Type} line), parsed by the grammar the Python decoder's
 * parser (rosbags) applies, so that a definition the JVM accepts has the same
 * types and field names there.
 *
 * <p>Deliberately narrower than that grammar: a definition with anything this
 * class is not sure of (annotations, a separator of another length, carriage
 * returns, field names that the Python side renames, duplicate or empty
 * messages, a missing dependency, a Time or Duration defined otherwise than
 * {@code int32 sec, uint32 nanosec}) is {@link Unsupported}, and the read goes
 * to the Python source, which decodes it or names what is wrong. Constants and
 * default values are parsed (to know where a line ends) and ignored.
 */
final class RosMsg {
  static final String TIME = "builtin_interfaces/msg/Time";
  static final String DURATION = "builtin_interfaces/msg/Duration";
  static final String SEPARATOR = "================================================================================";
  static final Set<String> BASE = new HashSet<>(Arrays.asList("bool", "byte", "char", "float32", "float64", "int8",
      "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "string"));
  /** Python's keywords: rosbags renames such a field (a trailing underscore); the JVM leaves them to it. */
  private static final Set<String> KEYWORDS = new HashSet<>(Arrays.asList("False", "None", "True", "and", "as",
      "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else", "except", "finally",
      "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise",
      "return", "try", "while", "with", "yield"));

  static final int SCALAR = 0;
  static final int ARRAY = 1;
  static final int SEQUENCE = 2;

  /** A definition the JVM does not decode (the Python source decides). */
  static final class Unsupported extends Exception {
    private static final long serialVersionUID = 1L;

    Unsupported(String why) {
      super(why);
    }
  }

  /** One field: a base type ({@code base} set) or a message ({@code ref} set), scalar, fixed array or sequence. */
  static final class Field {
    final String name;
    final String base; // null for a message type
    final String ref; // the message type's full name (pkg/msg/Type), null for a base type
    final int cardinality;
    final int size; // a fixed array's length

    Field(String name, String base, String ref, int cardinality, int size) {
      this.name = name;
      this.base = base;
      this.ref = ref;
      this.cardinality = cardinality;
      this.size = size;
    }
  }

  // The grammar's tokens (the same regular expressions as the Python parser's).
  private static final int UL = Pattern.UNIX_LINES;
  private static final Pattern HEADER_NAME = Pattern.compile("[A-Za-z0-9/_]+", UL);
  private static final Pattern HSPACE = Pattern.compile("[ \\t]*", UL);
  private static final Pattern SPACE = Pattern.compile("[ \\t]+", UL);
  private static final Pattern NEWLINE = Pattern.compile("\\n|$", UL);
  private static final Pattern COMMENT = Pattern.compile("#[^\\n]*", UL);
  private static final Pattern BASE_TYPE = Pattern.compile(
      "(bool|byte|char|float(32|64)|u?int(8|16|32|64)|string)\\b", UL);
  private static final Pattern BOUNDED_STRING = Pattern.compile("string<=[+-]?[0-9]+", UL);
  private static final Pattern PACKAGE = Pattern.compile("[a-z](?:_?[a-z0-9]+)*", UL);
  private static final Pattern MESSAGE_NAME = Pattern.compile("[A-Za-z](?:_?[A-Za-z0-9]+)*", UL);
  private static final Pattern DECIMAL = Pattern.compile("[+-]?[0-9]+", UL);
  private static final Pattern FIELD_NAME = Pattern.compile("[A-Za-z][A-Za-z0-9_]*", UL);
  private static final Pattern CONSTANT_NAME = Pattern.compile("[A-Z](?:_?[A-Z0-9]+)*", UL);
  private static final Pattern EQUALS = Pattern.compile("[ \\t]*=[ \\t]*", UL);
  private static final Pattern FLOAT = Pattern.compile(
      "[+-]?([0-9]+\\.[0-9]*([eE][+-]?[0-9]+)?)|(\\.[0-9]+([eE][+-]?[0-9]+)?)|([+-]?[0-9]+[eE][+-]?[0-9]+)", UL);
  private static final Pattern[] INTEGER = {Pattern.compile("[-+]?0[xX][a-fA-F0-9]+", UL),
    Pattern.compile("[-+]?0b[01]+", UL), Pattern.compile("[-+]?0[0-7]+", UL), DECIMAL};
  private static final Pattern BOOLEAN = Pattern.compile("true|false", UL | Pattern.CASE_INSENSITIVE);
  private static final Pattern QUOTED = Pattern.compile("('(?:\\\\.|[^'\\\\])*')|(\"(?:\\\\.|[^\"\\\\])*\")", UL);
  private static final Pattern UNQUOTED = Pattern.compile("[ \\t]*[^# \\t\\n][^\\n]*", UL);

  private final String text;
  private final Matcher m;

  private RosMsg(String text) {
    this.text = text;
    this.m = Pattern.compile("").matcher(text);
  }

  /** The end of {@code p} matched at {@code pos}, or -1. */
  private int re(Pattern p, int pos) {
    if (pos > text.length()) {
      return -1;
    }
    m.usePattern(p);
    m.region(pos, text.length());
    m.useTransparentBounds(true);
    m.useAnchoringBounds(false);
    return m.lookingAt() ? m.end() : -1;
  }

  private int lit(String s, int pos) {
    return text.startsWith(s, pos) ? pos + s.length() : -1;
  }

  /**
   * The message types of {@code schemaData} (a channel's ros2msg schema), by full name, with the
   * top type's full name under key "" — or {@link Unsupported}.
   */
  static Map<String, List<Field>> parse(String schemaName, byte[] schemaData) throws Unsupported {
    String body;
    try {
      body = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(schemaData)).toString();
    } catch (CharacterCodingException e) {
      throw new Unsupported("the schema is not UTF-8");
    }
    if (body.indexOf('\r') >= 0) {
      throw new Unsupported("carriage returns in the schema");
    }
    String top = topName(schemaName);
    RosMsg p = new RosMsg("MSG: " + top + "\n" + body);
    Map<String, List<Field>> types = p.specification();
    // The Python decoder adds Time and Duration when the text has none (ROS 1 needs them).
    types.putIfAbsent(TIME, timeFields());
    types.putIfAbsent(DURATION, timeFields());
    for (String t : new String[] {TIME, DURATION}) {
      List<Field> f = types.get(t);
      if (f.size() != 2 || !f.get(0).name.equals("sec") || !"int32".equals(f.get(0).base)
          || f.get(0).cardinality != SCALAR || !f.get(1).name.equals("nanosec") || !"uint32".equals(f.get(1).base)
          || f.get(1).cardinality != SCALAR) {
        throw new Unsupported(t + " defined otherwise than int32 sec, uint32 nanosec");
      }
    }
    if (!types.containsKey(top)) {
      throw new Unsupported("the schema does not define " + top);
    }
    checkReachable(types, top, new HashSet<>(), new HashSet<>());
    types.put("", List.of(new Field("", null, top, SCALAR, 0)));
    return types;
  }

  private static List<Field> timeFields() {
    return List.of(new Field("sec", "int32", null, SCALAR, 0), new Field("nanosec", "uint32", null, SCALAR, 0));
  }

  /** {@code pkg/Type} as {@code pkg/msg/Type}, as the Python decoder names the top type. */
  static String topName(String schemaName) throws Unsupported {
    if (schemaName == null) {
      throw new Unsupported("no schema name");
    }
    String[] parts = schemaName.split("/", -1);
    String name = parts.length == 2 ? parts[0] + "/msg/" + parts[1] : schemaName;
    return normalize(name);
  }

  /** A type name as rosbags normalises it, accepting only pkg/Type and pkg/msg/Type. */
  private static String normalize(String name) throws Unsupported {
    String[] parts = name.split("/", -1);
    for (String s : parts) {
      if (s.isEmpty() || s.equals(".") || s.equals("..")) {
        throw new Unsupported("type name " + name);
      }
    }
    if (parts.length == 2 && !parts[0].equals("msg") && !parts[0].equals("action")) {
      return parts[0] + "/msg/" + parts[1];
    }
    if (parts.length == 3 && parts[1].equals("msg")) {
      return name;
    }
    throw new Unsupported("type name " + name);
  }

  private static void checkReachable(Map<String, List<Field>> types, String name, Set<String> done,
      Set<String> path) throws Unsupported {
    if (done.contains(name)) {
      return;
    }
    if (!path.add(name)) {
      throw new Unsupported("recursive type " + name);
    }
    List<Field> fields = types.get(name);
    if (fields == null) {
      throw new Unsupported("missing type " + name);
    }
    if (fields.isEmpty()) {
      throw new Unsupported("empty message " + name);
    }
    Set<String> names = new HashSet<>();
    for (Field f : fields) {
      if (!names.add(f.name.toLowerCase(java.util.Locale.ROOT)) || KEYWORDS.contains(f.name)) {
        throw new Unsupported("field name " + f.name + " of " + name);
      }
      if (f.cardinality == ARRAY && f.size < 1) {
        throw new Unsupported("array of " + f.size + " in " + name);
      }
      if (f.ref != null && !(TIME.equals(f.ref) || DURATION.equals(f.ref))) {
        checkReachable(types, f.ref, done, path);
      }
    }
    path.remove(name);
    done.add(name);
  }

  // -- the grammar -------------------------------------------------------------------------------

  private Map<String, List<Field>> specification() throws Unsupported {
    Map<String, List<Field>> out = new LinkedHashMap<>();
    int pos = message(0, out);
    while (pos >= 0 && pos < text.length()) {
      int sep = lit(SEPARATOR + "\n", pos);
      if (sep < 0) {
        break;
      }
      pos = message(sep, out);
    }
    if (pos != text.length()) {
      throw new Unsupported("the schema text does not parse near character " + Math.max(pos, 0));
    }
    return out;
  }

  /** A section: its MSG line, then lines until one does not parse; returns where it ends, or -1. */
  private int message(int pos, Map<String, List<Field>> out) throws Unsupported {
    int p = lit("MSG: ", pos);
    if (p < 0) {
      return -1;
    }
    int e = re(HEADER_NAME, p);
    if (e < 0) {
      return -1;
    }
    String name = normalize(text.substring(p, e));
    p = re(HSPACE, e);
    if (p >= text.length() || text.charAt(p) != '\n') {
      return -1;
    }
    p++;
    List<Field> fields = new ArrayList<>();
    while (p < text.length()) {
      int next = line(p, fields, name);
      if (next < 0) {
        break;
      }
      p = next;
    }
    if (out.containsKey(name)) {
      throw new Unsupported("type " + name + " defined twice");
    }
    out.put(name, fields);
    return p;
  }

  private int line(int pos, List<Field> fields, String owner) throws Unsupported {
    int sp = re(HSPACE, pos);
    if (sp < text.length() && text.charAt(sp) == '@') {
      throw new Unsupported("annotation");
    }
    int c = constant(sp);
    if (c >= 0) {
      return c;
    }
    int f = field(sp, fields, owner);
    if (f >= 0) {
      return f;
    }
    return end(pos);
  }

  private int end(int pos) {
    int p = re(HSPACE, pos);
    int c = re(COMMENT, p);
    if (c >= 0) {
      p = c;
    }
    return re(NEWLINE, p);
  }

  private int constant(int pos) {
    int p = re(BASE_TYPE, pos);
    if (p < 0 || (p = re(SPACE, p)) < 0 || (p = re(CONSTANT_NAME, p)) < 0 || (p = re(EQUALS, p)) < 0
        || (p = value(p)) < 0) {
      return -1;
    }
    return end(p);
  }

  private int field(int pos, List<Field> fields, String owner) throws Unsupported {
    String base = null;
    String ref = null;
    int p = re(BOUNDED_STRING, pos);
    if (p >= 0) {
      base = "string";
    } else if ((p = re(BASE_TYPE, pos)) >= 0) {
      base = text.substring(pos, p);
    } else {
      p = pos;
      List<String> pkgs = new ArrayList<>();
      while (true) {
        int q = re(PACKAGE, p);
        if (q < 0 || q >= text.length() || text.charAt(q) != '/') {
          break;
        }
        pkgs.add(text.substring(p, q));
        p = q + 1;
      }
      int q = re(MESSAGE_NAME, p);
      if (q < 0) {
        return -1; // 'time' and 'duration' are message names too
      }
      pkgs.add(text.substring(p, q));
      p = q;
      String name = String.join("/", pkgs);
      ref = name.equals("time") ? TIME : name.equals("duration") ? DURATION
          : name.equals("Header") ? "std_msgs/msg/Header" : name;
    }
    int cardinality = SCALAR;
    int size = 0;
    if (p < text.length() && text.charAt(p) == '[') {
      int q = p + 1;
      int d = re(DECIMAL, q);
      boolean bounded = false;
      if (d < 0 && text.startsWith("<=", q) && (d = re(DECIMAL, q + 2)) >= 0) {
        bounded = true;
      }
      String digits = d >= 0 ? text.substring(bounded ? q + 2 : q, d) : null;
      q = d >= 0 ? d : q;
      if (q >= text.length() || text.charAt(q) != ']') {
        return -1;
      }
      p = q + 1;
      if (digits == null || bounded) {
        cardinality = SEQUENCE;
      } else {
        cardinality = ARRAY;
        try {
          size = Integer.parseInt(digits.startsWith("+") ? digits.substring(1) : digits);
        } catch (NumberFormatException e) {
          throw new Unsupported("array size " + digits);
        }
      }
    }
    if ((p = re(SPACE, p)) < 0) {
      return -1;
    }
    int n = re(FIELD_NAME, p);
    if (n < 0) {
      return -1;
    }
    String name = text.substring(p, n);
    p = n;
    int s = re(SPACE, p);
    if (s >= 0) {
      int v = value(s);
      if (v >= 0) {
        p = v;
      }
    }
    p = end(p);
    if (p < 0) {
      return -1;
    }
    if (ref != null) {
      if (ref.indexOf('/') < 0) {
        ref = owner.substring(0, owner.lastIndexOf('/')) + "/" + ref; // a type of the owner's package
      } else if (!ref.contains("/msg/")) {
        if (ref.contains("/action/")) {
          throw new Unsupported("action type " + ref);
        }
        ref = normalize(ref);
      }
      normalize(ref);
    }
    fields.add(new Field(name, base, ref, cardinality, size));
    return p;
  }

  private int value(int pos) {
    int a = arrayValue(pos);
    return a >= 0 ? a : scalarValue(pos);
  }

  private int arrayValue(int pos) {
    if (lit("[", pos) < 0) {
      return -1;
    }
    int p = scalarValue(re(HSPACE, pos + 1));
    if (p < 0) {
      return -1;
    }
    while (p < text.length()) {
      int q = re(HSPACE, p);
      if (lit(",", q) < 0) {
        break;
      }
      q = scalarValue(re(HSPACE, q + 1));
      if (q < 0) {
        break;
      }
      p = q;
    }
    p = re(HSPACE, p);
    return lit("]", p);
  }

  private int scalarValue(int pos) {
    if (pos < 0) {
      return -1;
    }
    int p = re(FLOAT, pos);
    if (p >= 0) {
      return p;
    }
    for (Pattern i : INTEGER) {
      if ((p = re(i, pos)) >= 0) {
        return p;
      }
    }
    if ((p = re(BOOLEAN, pos)) >= 0) {
      return p;
    }
    if ((p = re(QUOTED, pos)) >= 0) {
      return p;
    }
    return re(UNQUOTED, pos);
  }
}
