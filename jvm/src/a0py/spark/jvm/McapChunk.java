package a0py.spark.jvm;

import static a0py.spark.jvm.LittleEndian.le64;

import com.github.luben.zstd.ZstdDecompressCtx;
import com.github.luben.zstd.ZstdInputStreamNoFinalizer;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.channels.FileChannel;
import java.util.Arrays;
import java.util.zip.CRC32;
import net.jpountz.lz4.LZ4FrameInputStream;

/**
 * The decompressed records of a chunk (or of a region of message records
 * outside any chunk), as a0py/recording/reader.py and decompress.py read
 * them, with their error texts.
 *
 * <p>Invariant: no buffer is sized by a length the file has not backed with
 * bytes. A chunk's uncompressed size is believed only as far as its
 * compressed bytes plausibly reach, then the buffer grows with the data, and
 * never past the size it declares plus one byte, so a damaged chunk is a
 * RecordingFormatException, never an OutOfMemoryError.
 */
final class McapChunk {
  /** The largest chunk a byte array holds. */
  static final long MAX_CHUNK_SIZE = Integer.MAX_VALUE - 16;
  /** How far an uncompressed size is believed before the bytes back it (ratio, slack). */
  private static final long PLAUSIBLE_RATIO = 256;
  private static final long PLAUSIBLE_SLACK = 1 << 16;

  private McapChunk() {}

  /**
   * Where a chunk's records are read: the buffers (the chunk record as read, its records
   * decompressed) and the zstd context, kept from chunk to chunk by a partition reader, or
   * fresh and sized exactly for one chunk. {@link #records} holds the records in [0, {@link
   * #length}) until the next chunk is read into it.
   */
  static final class Reader implements AutoCloseable {
    private final boolean reused;
    private byte[] record = new byte[0];
    byte[] records = new byte[0];
    int length;
    private ZstdDecompressCtx zstd;

    /** reused: buffers kept and grown with some slack (else sized exactly for one chunk). */
    Reader(boolean reused) {
      this.reused = reused;
    }

    private byte[] fit(byte[] buf, long n) {
      if (buf.length >= n) {
        return buf;
      }
      return new byte[(int) (reused ? Math.min(MAX_CHUNK_SIZE, n + (n >> 3)) : n)];
    }

    @Override
    public void close() {
      if (zstd != null) {
        zstd.close();
        zstd = null;
      }
    }
  }

  /** The decompressed records of chunk (or region) {@code ref}, CRC-checked when asked, in an array of their own. */
  static byte[] records(FileChannel ch, McapLayout.Ref ref, String path, boolean validateCrc) {
    try (Reader r = new Reader(false)) {
      read(r, ch, ref, path, validateCrc);
      return r.length == r.records.length ? r.records : Arrays.copyOf(r.records, r.length);
    }
  }

  /** Reads the decompressed records of chunk (or region) {@code ref} into {@code into}, CRC-checked when asked. */
  static void read(Reader into, FileChannel ch, McapLayout.Ref ref, String path, boolean validateCrc) {
    if (ref.region) {
      byte[] data = McapLayout.pread(ch, ref.length, ref.offset, path);
      if (data.length != ref.length) {
        throw RecordingFormatException.at(path, ref.offset,
            "file shorter than its planned message region (changed since planning?)");
      }
      into.records = data;
      into.length = data.length;
      return;
    }
    McapLayout.checkReadSize(ref.length, ref.offset, path);
    into.record = into.fit(into.record, ref.length);
    byte[] rec = into.record;
    int got = McapLayout.preadInto(ch, rec, (int) ref.length, ref.offset, path);
    if (got != ref.length) {
      throw RecordingFormatException.at(path, ref.offset, "chunk record of " + ref.length
          + " bytes runs past the end of the file");
    }
    int op = rec[0] & 0xff;
    long n = le64(rec, McapRecords.RECORD_LENGTH);
    if (op != McapRecords.Chunk.OPCODE || n != ref.length - McapRecords.RECORD_HEADER) {
      throw RecordingFormatException.at(path, ref.offset, "expected a chunk record of "
          + (ref.length - McapRecords.RECORD_HEADER) + " bytes, found opcode 0x" + Integer.toHexString(op) + " of "
          + Long.toUnsignedString(n) + " bytes");
    }
    RecordBody b = new RecordBody(rec, path, ref.offset, "chunk record", McapRecords.RECORD_HEADER, got);
    b.u64("message_start_time");
    b.u64("message_end_time");
    long usize = b.u64("uncompressed_size");
    long crc = b.u32("uncompressed_crc");
    String comp = b.string("compression");
    long clen = b.u64("records length");
    b.need(clen, "records");
    decompress(into, rec, b.pos, (int) clen, comp, usize, path, ref.offset);
    if (validateCrc && crc != 0) {
      CRC32 c = new CRC32();
      c.update(into.records, 0, into.length);
      if (c.getValue() != crc) {
        throw RecordingFormatException.at(path, ref.offset, String.format("chunk CRC mismatch (record says 0x%08x, "
            + "the data gives 0x%08x): the chunk is damaged", crc, c.getValue()));
      }
    }
  }

  private static void decompress(Reader into, byte[] src, int off, int len, String comp, long size, String path,
      long at) {
    if (size < 0 || size > MAX_CHUNK_SIZE) {
      throw RecordingFormatException.at(path, at, "chunk of " + Long.toUnsignedString(size)
          + " uncompressed bytes: chunks above 2 GiB are not supported");
    }
    try {
      if (comp.isEmpty()) {
        into.records = into.fit(into.records, len);
        System.arraycopy(src, off, into.records, 0, len);
        into.length = len;
      } else if (comp.equals("zstd")) {
        zstd(into, src, off, len, size);
      } else if (comp.equals("lz4")) {
        into.records = drain(new LZ4FrameInputStream(new ByteArrayInputStream(src, off, len)), len, size);
        into.length = into.records.length;
      } else {
        throw RecordingFormatException.at(path, at, "chunk compression '" + comp
            + "' is not supported (zstd, lz4 or none)");
      }
    } catch (RecordingFormatException e) {
      throw e;
    } catch (Exception e) { // the codecs throw their own classes for damaged input
      throw RecordingFormatException.at(path, at, comp + " chunk does not decompress ("
          + e.getClass().getSimpleName() + ": " + e.getMessage() + "): the chunk is damaged");
    }
    if (into.length != size) {
      throw RecordingFormatException.at(path, at, "chunk decompressed to " + into.length + " bytes, its record says "
          + size);
    }
  }

  /**
   * One call (with the reader's context) into its buffer, grown to the declared size, when the
   * compressed bytes plausibly reach it, else streamed.
   */
  private static void zstd(Reader into, byte[] src, int off, int len, long size) throws IOException {
    if (size > len * PLAUSIBLE_RATIO + PLAUSIBLE_SLACK) {
      into.records = drain(new ZstdInputStreamNoFinalizer(new ByteArrayInputStream(src, off, len)), len, size);
      into.length = into.records.length;
      return;
    }
    into.records = into.fit(into.records, size);
    if (into.zstd == null) {
      into.zstd = new ZstdDecompressCtx();
    }
    // a frame larger than size fails here (dstSize too small): reported as damaged by the caller
    into.length = into.zstd.decompressByteArray(into.records, 0, (int) size, src, off, len);
  }

  /** Reads a stream to its end, growing the buffer with the data, never past size + 1 bytes. */
  private static byte[] drain(InputStream in, int compressed, long size) throws IOException {
    try (in) {
      long first = Math.min(size + 1, compressed * PLAUSIBLE_RATIO + PLAUSIBLE_SLACK);
      byte[] buf = new byte[(int) first];
      int n = 0;
      while (true) {
        if (n == buf.length) {
          if (n > size) {
            return Arrays.copyOf(buf, n); // longer than the record says: reported by the caller
          }
          buf = Arrays.copyOf(buf, (int) Math.min(size + 1, 2L * buf.length));
        }
        int got = in.read(buf, n, buf.length - n);
        if (got < 0) {
          return n == buf.length ? buf : Arrays.copyOf(buf, n);
        }
        n += got;
      }
    }
  }
}
