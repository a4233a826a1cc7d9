package a0py.spark.jvm;

import static a0py.spark.jvm.LittleEndian.le16;
import static a0py.spark.jvm.LittleEndian.le32;
import static a0py.spark.jvm.LittleEndian.le64;

/** The fields of an MCAP Message record at offset o of a chunk's decompressed records. */
final class MessageRecords {
  private MessageRecords() {}

  static int channelId(byte[] recs, int o) {
    return le16(recs, o + McapRecords.Message.CHANNEL_ID);
  }

  /** The record's 32-bit sequence. */
  static long sequence(byte[] recs, int o) {
    return le32(recs, o + McapRecords.Message.SEQUENCE);
  }

  /** Where the message's data starts. */
  static int data(int o) {
    return o + McapRecords.Message.DATA;
  }

  /** The bytes of the message's data (the record was checked to hold its fixed fields). */
  static int dataSize(byte[] recs, int o) {
    return (int) le64(recs, o + McapRecords.RECORD_LENGTH) - (McapRecords.Message.DATA - McapRecords.RECORD_HEADER);
  }

  /** log_time in µs (a time past 2**63 - 1 ns capped there). */
  static long logUs(byte[] recs, int o) {
    return capped(le64(recs, o + McapRecords.Message.LOG_TIME)) / 1000;
  }

  /** publish_time in µs (a time past 2**63 - 1 ns capped there). */
  static long wallUs(byte[] recs, int o) {
    return capped(le64(recs, o + McapRecords.Message.PUBLISH_TIME)) / 1000;
  }

  private static long capped(long u64) {
    return u64 < 0 ? Long.MAX_VALUE : u64;
  }
}
