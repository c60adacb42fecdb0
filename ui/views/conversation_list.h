// The kept conversations (ConversationStore) as a list beside the chat: click one to reopen it; New, Rename,
// Delete and Export (JSON, which Chat ▸ Load conversation reads back, or Markdown) below; a filter above. A
// damaged file is listed with its reason and opening it says why in one line. The main window does the opening.
#pragma once
#include <QWidget>
#include <functional>

#include "ui/conversation_store.h"
#include "ui/models/conversation_list_model.h"

class QLabel;
class QLineEdit;
class QListView;
class QPushButton;
class QSortFilterProxyModel;
class QToolButton;

namespace colibri::studio {

class ElidedLabel;

enum class ExportFormat { Json, Markdown };

class ConversationList : public QWidget {
    Q_OBJECT
public:
    explicit ConversationList(ConversationStore* store, QWidget* parent = nullptr);

    // Reads the folder again; `current` is shown in bold and selected.
    void refresh(const QString& current);
    // The conversation shown was just written: its row goes to the top (added when new), in bold.
    void saved(const StoredConversation& c);
    // One line under the list (an error, or what was done); empty hides it.
    void show_message(const QString& text, bool is_error);
    // Hides the line when it shows an error (a later success makes it stale); other messages stay.
    void clear_error() {
        if (message_is_error_) show_message({}, false);
    }

    // What the buttons do, for tests and the menu: no dialogs.
    Status rename(const QString& id, const QString& title);
    Status remove(const QString& id);
    Status export_to(const QString& id, const QString& path, ExportFormat format) const;

    ConversationListModel* model() { return &model_; }
    QListView* view() const { return view_; }
    QLineEdit* filter() const { return filter_; }
    QLabel* message_label() const;
    QPushButton* new_button() const { return new_; }
    QPushButton* rename_button() const { return rename_; }
    QPushButton* delete_button() const { return delete_; }
    QToolButton* export_button() const { return export_; }
    // The selected conversation's id ("" when none).
    QString selected_id() const;
    void select(const QString& id);
    // Who confirms a deletion; by default a QMessageBox. Tests answer here.
    void set_delete_question(std::function<bool(const QString& title)> ask) { ask_delete_ = std::move(ask); }

signals:
    void openRequested(const QString& id);
    void newRequested();
    void renamed(const QString& id, const QString& title);
    void removed(const QString& id);

private:
    void rename_dialog();
    void delete_selected();
    void export_dialog(ExportFormat format);
    void update_buttons();

    ConversationStore* store_;
    ConversationListModel model_;
    QSortFilterProxyModel* proxy_ = nullptr;
    QLineEdit* filter_ = nullptr;
    QListView* view_ = nullptr;
    ElidedLabel* message_ = nullptr;
    QPushButton *new_ = nullptr, *rename_ = nullptr, *delete_ = nullptr;
    QToolButton* export_ = nullptr;
    std::function<bool(const QString&)> ask_delete_;
    bool message_is_error_ = false;
};

}  // namespace colibri::studio
