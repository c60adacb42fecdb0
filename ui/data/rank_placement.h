// Which ranks hold each routed expert when a server spreads its experts over several processes (`mpirun -np N
// colibri serve`; /v1/models' `placement`, docs/SERVER.md). A plain value inside ModelSummary.
#pragma once
#include <QHash>
#include <QVector>

namespace colibri::studio {

struct RankPlacement {
    int ranks = 1;
    // MoE layer → per expert the ranks holding it, ascending; more than one: a replicated expert, its tokens split.
    QHash<int, QVector<QVector<int>>> holders;

    bool spread() const { return ranks > 1 && !holders.isEmpty(); }
    // The ranks holding expert `expert` of `layer`; empty when the placement does not say.
    QVector<int> holders_of(int layer, int expert) const {
        const auto it = holders.constFind(layer);
        if (it == holders.constEnd() || expert < 0 || expert >= it->size()) return {};
        return (*it)[expert];
    }
};

// What the Studio accepts from a server: beyond this many ranks or placement entries it is not a placement colibri
// serve writes (ExpertPlacement holds at most 64 ranks; the largest MoE models have about 60 × 384 experts).
inline constexpr int kMaxRanks = 4096;
inline constexpr qsizetype kMaxPlacementEntries = qsizetype(1) << 22;

}  // namespace colibri::studio
