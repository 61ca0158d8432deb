import CTesseract
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Process-wide settings of the C libraries, applied once before the first image or engine.
public enum TesseractRuntime {
    private static let configured = Mutex(false)

    /// Where the `*.traineddata` files are: `$TESSDATA_PREFIX` when set, else Debian's directory.
    public static var dataPath: String {
        if let prefix = ProcessInfo.processInfo.environment["TESSDATA_PREFIX"], !prefix.isEmpty { return prefix }
        return "/usr/share/tesseract-ocr/5/tessdata"
    }

    /// The languages whose trained data is installed (file names without `.traineddata`), sorted; `osd` is the
    /// orientation model, not a language.
    public static func installedLanguages(in directory: String = dataPath) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(".traineddata") }
            .map { String($0.dropLast(".traineddata".count)) }
            .filter { $0 != "osd" }
            .sorted()
    }

    /// Silences Leptonica's messages on stderr (a refused upload is an answer, not a log line) and sets
    /// `OMP_THREAD_LIMIT=1` for child processes (the `tesseract` program started by tests and benchmarks).
    static func configureOnce() {
        configured.withLock { done in
            guard !done else { return }
            done = true
            _ = setMsgSeverity(Int32(L_SEVERITY_NONE))
            setenv("OMP_THREAD_LIMIT", "1", 0)
        }
    }

    /// Makes OpenMP parallel regions entered from the calling thread run on that thread alone.
    ///
    /// Debian builds libtesseract with OpenMP: the LSTM asks for 4 threads per layer, and on a busy 2-core machine
    /// those threads spend most of their time spinning (five pages: 124 s by default, 10.4 s with
    /// `OMP_THREAD_LIMIT=1`). That variable is read once, when libgomp loads with the process, so setting it from
    /// Swift is too late; `omp_set_max_active_levels(0)` is the run-time equivalent, but it is per thread, so an
    /// engine calls this before every recognition on whatever thread runs it. Looked up dynamically so that a
    /// Tesseract built without OpenMP needs nothing.
    static func limitOpenMPToCallingThread() {
        guard let setMaxActiveLevels = openMPSetMaxActiveLevels else { return }
        setMaxActiveLevels(0)
    }

    /// The calling thread's OpenMP `max-active-levels` (0 once `limitOpenMPToCallingThread` ran on it), or nil
    /// without OpenMP. For tests.
    public static func openMPMaxActiveLevelsOfCallingThread() -> Int? {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "omp_get_max_active_levels") else {
            return nil
        }
        typealias Get = @convention(c) () -> Int32
        return Int(unsafeBitCast(symbol, to: Get.self)())
    }

    private typealias SetLevels = @convention(c) (Int32) -> Void
    private static let openMPSetMaxActiveLevels: SetLevels? = {
        // RTLD_DEFAULT: libgomp is already loaded as a dependency of libtesseract.
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "omp_set_max_active_levels") else {
            return nil
        }
        return unsafeBitCast(symbol, to: SetLevels.self)
    }()
}
