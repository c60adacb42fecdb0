// Expert-parallel ranks as threads of the test (engine/distributed/thread_group.h, no MPI): each loads the model
// file and joins as generate's ranks do, then runs the test's part for its rank. And the reference models converted
// once per test (q8_0), which the ranks' tests share.
#pragma once
#include <QFile>
#include <QTemporaryDir>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"
#include "engine/core/open_model.h"
#include "engine/distributed/thread_group.h"

namespace colibri::test {

// `ranks` threads on `path`, exchanges bounded by `limit`, the experts spread by the `placement` file (empty:
// round-robin); `part` runs on each once it has joined and returns that rank's status. Returns every rank's status
// (a failed load or join is that rank's).
inline std::vector<Status> thread_ranks(const std::string& path, uint32_t ranks, std::chrono::milliseconds limit,
                                        const std::function<Status(uint32_t rank, const Model&, Communicator&)>& part,
                                        const std::string& placement = {}) {
    ThreadGroup group(ranks);
    std::vector<Status> statuses(ranks);
    std::vector<std::thread> threads;
    for (uint32_t r = 0; r < ranks; ++r)
        threads.emplace_back([&, r] {
            Communicator& comm = group.rank(r);
            auto model = Model::load(path);
            if (!model) return void(statuses[r] = model.status());
            auto parallel = join_ranks(*model.value(), comm, RankRequest{placement, limit, &comm});
            if (!parallel) return void(statuses[r] = parallel.status());
            statuses[r] = part(r, *model.value(), comm);
        });
    for (std::thread& t : threads) t.join();
    return statuses;
}

// ../shared/reference's `family` converted to q8_0 in `dir` (once).
inline std::string converted_reference(const QTemporaryDir& dir, const QString& family) {
    const QString path = dir.filePath(family + ".bin");
    if (!QFile::exists(path)) {
        const CliResult r = run_cli({"convert", reference("hf/" + family + "/model"), "-o", path, "--type", "q8_0", "-q"});
        if (r.exit_code != 0) qWarning("convert: %s", r.err.constData());
    }
    return path.toStdString();
}

}  // namespace colibri::test
