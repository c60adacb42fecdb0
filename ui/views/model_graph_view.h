// The layer graph of the file in the validator: one row per layer (input, layers, output), each block a box with
// its title and tensors (name, shape, type), framed in its sections' state (damaged red); a click selects the
// block's tensors in the table, and its tooltip lists every tensor.
#pragma once
#include <QWidget>
#include <vector>

#include "ui/models/model_graph.h"
#include "ui/models/validator_models.h"

namespace colibri::studio {

class ModelGraphView : public QWidget {
    Q_OBJECT
public:
    explicit ModelGraphView(QWidget* parent = nullptr);
    void set_file(const FileLayout& layout, const std::vector<SectionState>& states);
    void set_states(const std::vector<SectionState>& states);
    const std::vector<GraphRow>& graph() const { return rows_; }
    // Where block b of row r is drawn (empty when there is no such block), and which block is at p.
    QRect block_rect(int row, int block) const;
    std::pair<int, int> block_at(const QPoint& p) const;
    void select_block(int row, int block);
    std::pair<int, int> selected() const { return selected_; }
    // The lines the last paint drew inside blocks (titles and tensor lines), elided as they were drawn.
    QStringList drawn_text() const { return drawn_; }
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override { return {160, 60}; }
    bool hasHeightForWidth() const override { return true; }
    int heightForWidth(int) const override { return content_height(); }

signals:
    void blockClicked(const std::vector<int>& sections);

protected:
    void paintEvent(QPaintEvent*) override;
    void mousePressEvent(QMouseEvent* e) override;
    bool event(QEvent* e) override;

private:
    SectionState state_of(const GraphBlock& b) const;
    int row_height(const GraphRow& r) const;
    int row_top(int row) const;
    int content_height() const;
    int label_width() const;
    int line_height() const;

    std::vector<GraphRow> rows_;
    std::vector<SectionState> states_;
    std::pair<int, int> selected_{-1, -1};
    int block_width_ = 0;  // the narrowest a block may be
    mutable QStringList drawn_;
};

}  // namespace colibri::studio
