// Test helper: where the repository root, the golden vectors and the koru binary are, from plugins/jetbrains as the working directory.
package dev.koru.jetbrains.client;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

final class TestPaths {
    private TestPaths() {}

    /** The repository root: $KORU_ROOT, else two levels above plugins/jetbrains. */
    static Path root() {
        String explicit = System.getenv("KORU_ROOT");
        if (explicit != null && !explicit.isEmpty()) return Paths.get(explicit).toAbsolutePath();
        Path here = Paths.get("").toAbsolutePath();
        for (Path p = here; p != null; p = p.getParent()) {
            if (Files.isDirectory(p.resolve("protocol").resolve("vectors"))) return p;
        }
        throw new IllegalStateException("cannot find the repository root (protocol/vectors) above " + here + "; set KORU_ROOT");
    }

    /**
     * The koru binary: $KORU_BIN, else ../../target/debug/koru relative to plugins/jetbrains;
     * fails with a clear message when neither exists.
     */
    static Path koruBinary() {
        String explicit = System.getenv("KORU_BIN");
        if (explicit != null && !explicit.isEmpty()) {
            Path path = Paths.get(explicit);
            if (Files.isExecutable(path)) return path;
            throw new IllegalStateException("KORU_BIN=" + explicit + " is not an executable file");
        }
        Path fallback = root().resolve("target").resolve("debug").resolve("koru");
        if (Files.isExecutable(fallback)) return fallback;
        throw new IllegalStateException("no koru binary: set KORU_BIN or build one with `cargo build --bin koru` (looked for "
                + fallback + "); plugins/jetbrains/build.sh does both");
    }
}
