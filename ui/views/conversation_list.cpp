#include "ui/views/conversation_list.h"

#include <QFileDialog>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QJsonDocument>
#include <QLineEdit>
#include <QListView>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QRegularExpression>
#include <QSortFilterProxyModel>
#include <QToolButton>
#include <QVBoxLayout>

#include "ui/colors.h"
#include "ui/conversation.h"
#include "ui/file_output.h"
#include "ui/views/elided_label.h"

namespace colibri::studio {

ConversationList::ConversationList(ConversationStore* store, QWidget* parent) : QWidget(parent), store_(store) {
    setObjectName(QStringLiteral("conversation_list"));
    filter_ = new QLineEdit;
    filter_->setPlaceholderText(tr("Search conversations"));
    filter_->setClearButtonEnabled(true);
    proxy_ = new QSortFilterProxyModel(this);
    proxy_->setSourceModel(&model_);
    proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
    connect(filter_, &QLineEdit::textChanged, proxy_, &QSortFilterProxyModel::setFilterFixedString);
    view_ = new QListView;
    view_->setModel(proxy_);
    view_->setWordWrap(true);
    view_->setTextElideMode(Qt::ElideRight);
    view_->setSelectionMode(QAbstractItemView::SingleSelection);
    view_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    view_->setMinimumHeight(60);
    message_ = new ElidedLabel;
    message_->setObjectName(QStringLiteral("conversation_message"));
    message_->hide();
    new_ = new QPushButton(tr("New"));
    new_->setToolTip(tr("Start a new conversation (Ctrl+N); this one stays in the list"));
    rename_ = new QPushButton(tr("Rename…"));
    delete_ = new QPushButton(tr("Delete"));
    export_ = new QToolButton;
    export_->setText(tr("Export"));
    export_->setPopupMode(QToolButton::InstantPopup);
    auto* menu = new QMenu(export_);
    menu->addAction(tr("As JSON (Colibri Studio conversation)…"), this, [this] { export_dialog(ExportFormat::Json); });
    menu->addAction(tr("As Markdown…"), this, [this] { export_dialog(ExportFormat::Markdown); });
    export_->setMenu(menu);
    auto* buttons = new QHBoxLayout;
    buttons->setContentsMargins(0, 0, 0, 0);
    for (QWidget* b : std::initializer_list<QWidget*>{new_, rename_, delete_, export_}) buttons->addWidget(b);
    buttons->addStretch();
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(filter_);
    layout->addWidget(view_, 1);
    layout->addWidget(message_);
    layout->addLayout(buttons);

    connect(new_, &QPushButton::clicked, this, &ConversationList::newRequested);
    connect(rename_, &QPushButton::clicked, this, &ConversationList::rename_dialog);
    connect(delete_, &QPushButton::clicked, this, &ConversationList::delete_selected);
    connect(view_, &QListView::activated, this, [this](const QModelIndex& i) { emit openRequested(i.data(ConversationListModel::IdRole).toString()); });
    connect(view_, &QListView::clicked, this, [this](const QModelIndex& i) { emit openRequested(i.data(ConversationListModel::IdRole).toString()); });
    connect(view_->selectionModel(), &QItemSelectionModel::selectionChanged, this, &ConversationList::update_buttons);
    update_buttons();
}

QLabel* ConversationList::message_label() const { return message_; }

void ConversationList::refresh(const QString& current) {
    model_.set_conversations(store_->list());
    model_.set_current(current);
    select(current);
    update_buttons();
}

void ConversationList::saved(const StoredConversation& c) {
    QVector<StoredConversation> rows = model_.conversations();
    rows.removeIf([&c](const StoredConversation& r) { return r.id == c.id; });
    rows.prepend(c);
    model_.set_conversations(std::move(rows));
    model_.set_current(c.id);
    select(c.id);
    update_buttons();
}

void ConversationList::show_message(const QString& text, bool is_error) {
    message_->setText(text);
    QPalette p = message_->palette();
    p.setColor(QPalette::WindowText, is_error ? status_color(StatusColor::Error) : palette().color(QPalette::WindowText));
    message_->setPalette(p);
    message_->setVisible(!text.isEmpty());
    message_is_error_ = is_error && !text.isEmpty();
}

QString ConversationList::selected_id() const {
    const QModelIndexList rows = view_->selectionModel()->selectedRows();
    return rows.isEmpty() ? QString() : rows.front().data(ConversationListModel::IdRole).toString();
}

void ConversationList::select(const QString& id) {
    const int row = model_.row_of(id);
    const QModelIndex i = row < 0 ? QModelIndex() : proxy_->mapFromSource(model_.index(row));
    if (i.isValid()) view_->selectionModel()->setCurrentIndex(i, QItemSelectionModel::ClearAndSelect);
    else view_->selectionModel()->clearSelection();
}

void ConversationList::update_buttons() {
    const bool any = !selected_id().isEmpty();
    const QModelIndexList rows = view_->selectionModel()->selectedRows();
    const bool damaged = !rows.isEmpty() && rows.front().data(ConversationListModel::DamagedRole).toBool();
    rename_->setEnabled(any && !damaged);
    delete_->setEnabled(any);  // a damaged file can go
    export_->setEnabled(any && !damaged);
}

Status ConversationList::rename(const QString& id, const QString& title) {
    if (Status s = store_->rename(id, title); !s) return s;
    refresh(model_.current());
    emit renamed(id, title.simplified());
    return Status::ok();
}

Status ConversationList::remove(const QString& id) {
    if (Status s = store_->remove(id); !s) return s;
    refresh(model_.current() == id ? QString() : model_.current());
    emit removed(id);
    return Status::ok();
}

Status ConversationList::export_to(const QString& id, const QString& path, ExportFormat format) const {
    auto doc = store_->read(id);
    if (!doc) return doc.status();
    if (format == ExportFormat::Json) return save_file(path, QJsonDocument(doc.value()).toJson(QJsonDocument::Indented));
    Conversation c;
    COLIBRI_TRY(c.from_json(doc.value()));
    QString md = c.to_markdown();
    const QString title = doc.value().value("title").toString();
    if (!title.isEmpty()) md.replace(0, md.indexOf(QLatin1Char('\n')), QStringLiteral("# ") + title);  // the heading says which one
    return save_file(path, md.toUtf8());
}

void ConversationList::rename_dialog() {
    const QString id = selected_id();
    const int row = model_.row_of(id);
    if (row < 0) return;
    bool ok = false;
    const QString title = QInputDialog::getText(this, tr("Rename conversation"), tr("Title:"), QLineEdit::Normal, model_.conversations()[row].title, &ok);
    if (!ok || title.trimmed().isEmpty()) return;
    if (Status s = rename(id, title); !s) show_message(QString::fromStdString(s.message()), true);
}

void ConversationList::delete_selected() {
    const QString id = selected_id();
    const int row = model_.row_of(id);
    if (row < 0) return;
    const QString title = model_.conversations()[row].title;
    const bool yes = ask_delete_ ? ask_delete_(title)
                                 : QMessageBox::question(this, tr("Delete conversation"), tr("Delete “%1”? This cannot be undone.").arg(title),
                                                         QMessageBox::Yes | QMessageBox::Cancel, QMessageBox::Cancel) == QMessageBox::Yes;
    if (!yes) return;
    if (Status s = remove(id); !s) show_message(QString::fromStdString(s.message()), true);
    else show_message(tr("Deleted “%1”").arg(title), false);
}

void ConversationList::export_dialog(ExportFormat format) {
    const QString id = selected_id();
    const int row = model_.row_of(id);
    if (row < 0) return;
    QString name = model_.conversations()[row].title;
    name.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9 _-]")), QStringLiteral("_"));
    const bool json = format == ExportFormat::Json;
    const QString path = QFileDialog::getSaveFileName(this, json ? tr("Export the conversation as JSON") : tr("Export the conversation as Markdown"),
                                                      name.trimmed() + (json ? QStringLiteral(".json") : QStringLiteral(".md")),
                                                      json ? tr("Conversations (*.json)") : tr("Markdown (*.md)"));
    if (path.isEmpty()) return;
    if (Status s = export_to(id, path, format); !s) show_message(QString::fromStdString(s.message()), true);
    else show_message(tr("Exported to %1").arg(path), false);
}

}  // namespace colibri::studio
