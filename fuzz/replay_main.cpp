// A libFuzzer target run without libFuzzer: every seed as it is, then a fixed number of mutations of each, chosen by
// a seeded generator, so that a run is the same on every machine and a failure can be replayed. The mutations are the
// kinds that break readers: flipped bits, boundary integers written over 1, 2, 4 or 8 bytes, truncations, cut and
// repeated chunks, and the target's dictionary tokens (the same .dict files libFuzzer reads) inserted or written over.
//
// The sanitized g++ tree (CI's) builds each fuzz_<target> with this driver and runs it under ASan and UBSan; a clang
// tree (COLIBRI_FUZZ=ON) links libFuzzer instead, for coverage-guided fuzzing without a bound (fuzz/CMakeLists.txt).
//
// Usage: fuzz_<target> [--mutations N] [--seed S] [--dict FILE] [--artifacts DIR] [--timeout SECONDS] SEEDS...
// SEEDS are files or directories (read recursively, in name order). When an input fails — a sanitizer report, an
// uncaught exception, a fuzz_check, an input slower than --timeout — the input is written to DIR/failing-input
// before the process ends and its origin is printed: `fuzz_<target> DIR/failing-input` runs that one input.
#include <sanitizer/common_interface_defs.h>
#include <signal.h>

#include <csignal>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

// What is running now, for the failure handlers (set before each input; read only when the process ends).
struct Current {
    const Bytes* input = nullptr;
    std::string origin;
    std::string artifact;  // DIR/failing-input; empty: do not write
} g_current;

// Writes the running input out with plain system calls: the handlers run inside a failing process.
void save_failing_input() {
    static bool saved = false;
    if (saved || g_current.input == nullptr) return;
    saved = true;
    std::fprintf(stderr, "fuzz replay: failing input: %s\n", g_current.origin.c_str());
    if (g_current.artifact.empty()) return;
    std::FILE* f = std::fopen(g_current.artifact.c_str(), "wb");
    if (f == nullptr) return;
    std::fwrite(g_current.input->data(), 1, g_current.input->size(), f);
    std::fclose(f);
    std::fprintf(stderr, "fuzz replay: written to %s (run the target with that file to replay it)\n", g_current.artifact.c_str());
}

void on_sanitizer_death() { save_failing_input(); }

void on_terminate() {
    save_failing_input();
    std::fprintf(stderr, "fuzz replay: uncaught exception\n");
    std::abort();
}

// fuzz_check and a failed assertion end in abort(): the input is saved, then abort's own end follows.
void on_abort(int) {
    save_failing_input();
    std::signal(SIGABRT, SIG_DFL);
    std::raise(SIGABRT);
}

void on_alarm(int) {
    static const char msg[] = "fuzz replay: an input ran past the time limit (a hang)\n";
    [[maybe_unused]] const ssize_t n = ::write(2, msg, sizeof msg - 1);
    save_failing_input();
    std::_Exit(1);
}

bool read_file(const std::filesystem::path& p, Bytes* out) {
    std::ifstream in(p, std::ios::binary);
    if (!in) return false;
    out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return true;
}

// A libFuzzer dictionary: lines `name="value"` or `"value"`, with \\, \" and \xHH escapes; # starts a comment.
std::vector<Bytes> read_dictionary(const std::string& path) {
    std::vector<Bytes> tokens;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        const size_t open = line.find('"'), close = line.rfind('"');
        if (line.empty() || line[0] == '#' || open == std::string::npos || close <= open) continue;
        Bytes t;
        for (size_t i = open + 1; i < close; ++i) {
            if (line[i] != '\\' || i + 1 >= close) {
                t.push_back(static_cast<uint8_t>(line[i]));
            } else if (line[i + 1] == 'x' && i + 3 < close) {
                t.push_back(static_cast<uint8_t>(std::strtoul(line.substr(i + 2, 2).c_str(), nullptr, 16)));
                i += 3;
            } else {
                t.push_back(static_cast<uint8_t>(line[++i]));
            }
        }
        if (!t.empty()) tokens.push_back(std::move(t));
    }
    return tokens;
}

class Mutator {
public:
    Mutator(uint64_t seed, const std::vector<Bytes>& dictionary) : rng_(seed), dictionary_(dictionary) {}

    // One to four mutations of the seed.
    Bytes mutate(const Bytes& seed) {
        Bytes b = seed;
        const int rounds = 1 + static_cast<int>(below(4));
        for (int r = 0; r < rounds; ++r) once(b);
        return b;
    }

private:
    uint64_t below(uint64_t n) { return n == 0 ? 0 : std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }

    // Readers look at the start of a file (magic, header, counts) more than the rest: half the positions fall in
    // the first 256 bytes.
    size_t position(const Bytes& b) {
        if (b.empty()) return 0;
        return below(2) == 0 ? below(std::min<size_t>(b.size(), 256)) : below(b.size());
    }

    void write_integer(Bytes& b, size_t at, uint64_t v, size_t width) {
        for (size_t i = 0; i < width && at + i < b.size(); ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
    }

    void once(Bytes& b) {
        static const uint64_t kBoundaries[] = {0, 1, 2, 7, 8, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xffff, 0x10000, 0x7fffffff,
                                               0x80000000, 0xffffffff, 0x100000000, 0x7fffffffffffffff, 0x8000000000000000,
                                               0xffffffffffffffff, 4096, 65536, 1 << 20};
        switch (below(b.empty() ? 1 : 8)) {
            case 0: {  // insert a dictionary token, or a byte when there is no dictionary
                Bytes t = dictionary_.empty() ? Bytes{static_cast<uint8_t>(below(256))} : dictionary_[below(dictionary_.size())];
                b.insert(b.begin() + static_cast<std::ptrdiff_t>(position(b)), t.begin(), t.end());
                break;
            }
            case 1:  // flip one bit
                b[position(b)] ^= static_cast<uint8_t>(1u << below(8));
                break;
            case 2:  // a boundary integer over 1, 2, 4 or 8 bytes
                write_integer(b, position(b), kBoundaries[below(std::size(kBoundaries))], size_t{1} << below(4));
                break;
            case 3:  // a random byte
                b[position(b)] = static_cast<uint8_t>(below(256));
                break;
            case 4:  // truncate
                b.resize(below(b.size()));
                break;
            case 5: {  // cut a chunk out
                const size_t at = position(b), n = 1 + below(std::min<size_t>(b.size() - at, 64));
                b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n));
                break;
            }
            case 6: {  // repeat a chunk in place
                const size_t at = position(b), n = 1 + below(std::min<size_t>(b.size() - at, 64));
                const Bytes chunk(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n));
                b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), chunk.begin(), chunk.end());
                break;
            }
            default: {  // a dictionary token written over the bytes there
                if (dictionary_.empty()) break;
                const Bytes& t = dictionary_[below(dictionary_.size())];
                const size_t at = position(b);
                for (size_t i = 0; i < t.size() && at + i < b.size(); ++i) b[at + i] = t[i];
                break;
            }
        }
    }

    std::mt19937_64 rng_;
    const std::vector<Bytes>& dictionary_;
};

int usage(const char* argv0, const char* why) {
    std::fprintf(stderr, "%s: %s\nusage: %s [--mutations N] [--seed S] [--dict FILE] [--artifacts DIR] [--timeout SECONDS] SEEDS...\n",
                 argv0, why, argv0);
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    uint64_t mutations = 0, seed = 1;
    unsigned timeout_s = 30;
    std::string dict, artifacts;
    std::vector<std::filesystem::path> seeds;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        if (a == "--mutations" && has_value) mutations = std::strtoull(argv[++i], nullptr, 10);
        else if (a == "--seed" && has_value) seed = std::strtoull(argv[++i], nullptr, 10);
        else if (a == "--dict" && has_value) dict = argv[++i];
        else if (a == "--artifacts" && has_value) artifacts = argv[++i];
        else if (a == "--timeout" && has_value) timeout_s = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
        else if (a.rfind("--", 0) == 0) return usage(argv[0], ("unknown or incomplete option " + a).c_str());
        else seeds.emplace_back(a);
    }
    std::vector<std::filesystem::path> files;
    for (const auto& s : seeds) {
        std::error_code ec;
        if (std::filesystem::is_directory(s, ec)) {
            for (const auto& e : std::filesystem::recursive_directory_iterator(s, ec))
                if (e.is_regular_file()) files.push_back(e.path());
        } else if (std::filesystem::is_regular_file(s, ec)) {
            files.push_back(s);
        } else {
            return usage(argv[0], ("no such seed file or directory: " + s.string()).c_str());
        }
    }
    if (files.empty()) return usage(argv[0], "no seeds");
    std::sort(files.begin(), files.end());
    if (!artifacts.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(artifacts, ec);
        g_current.artifact = (std::filesystem::path(artifacts) / "failing-input").string();
    }
    const std::vector<Bytes> dictionary = dict.empty() ? std::vector<Bytes>{} : read_dictionary(dict);
    __sanitizer_set_death_callback(on_sanitizer_death);
    std::set_terminate(on_terminate);
    std::signal(SIGALRM, on_alarm);
    std::signal(SIGABRT, on_abort);

    auto run = [&](const Bytes& input, std::string origin) {
        g_current.input = &input;
        g_current.origin = std::move(origin);
        ::alarm(timeout_s);
        LLVMFuzzerTestOneInput(input.data(), input.size());
        ::alarm(0);
    };
    uint64_t runs = 0;
    for (const auto& f : files) {
        Bytes input;
        if (!read_file(f, &input)) return usage(argv[0], ("cannot read " + f.string()).c_str());
        // Each seed's mutations depend on --seed and the seed's own name only: adding a seed changes no other's.
        uint64_t name_hash = 0xcbf29ce484222325ull;
        for (unsigned char c : f.filename().string()) name_hash = (name_hash ^ c) * 0x100000001b3ull;
        Mutator mutator(seed ^ name_hash, dictionary);
        run(input, f.string());
        ++runs;
        for (uint64_t k = 0; k < mutations; ++k) {
            const Bytes m = mutator.mutate(input);
            run(m, f.string() + ", mutation " + std::to_string(k + 1) + " (--seed " + std::to_string(seed) + ")");
            ++runs;
        }
    }
    g_current.input = nullptr;
    std::printf("fuzz replay: %zu seeds, %llu inputs, %zu dictionary tokens: no failure\n", files.size(),
                static_cast<unsigned long long>(runs), dictionary.size());
    return 0;
}
