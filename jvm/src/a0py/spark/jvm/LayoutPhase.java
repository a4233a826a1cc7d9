package a0py.spark.jvm;

import java.nio.channels.FileChannel;

/** A phase of planning a file: it reads the open file and fills its layout (McapSummary, McapScan). */
abstract class LayoutPhase {
  final FileChannel ch;
  final McapLayout lay;
  final String path;

  LayoutPhase(FileChannel ch, McapLayout lay) {
    this.ch = ch;
    this.lay = lay;
    this.path = lay.path;
  }
}
