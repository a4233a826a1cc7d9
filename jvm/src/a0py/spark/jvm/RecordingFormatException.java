package a0py.spark.jvm;

/** A damaged or hostile recording: the message names the file, the byte
 * offset and the field, as the Python source's RecordingFormatError does. */
public final class RecordingFormatException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public RecordingFormatException(String message) {
    super(message);
  }

  static RecordingFormatException at(String path, long offset, String what) {
    return new RecordingFormatException(path + ": at byte " + offset + ": " + what);
  }
}
