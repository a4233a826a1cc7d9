package a0py.spark.jvm;

/** A bad option or a path that names nothing (the Python source's RecordingOptionError). */
public final class RecordingOptionException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  public RecordingOptionException(String message) {
    super(message);
  }
}
