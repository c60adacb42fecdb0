// Shared by the local-transport suites (test_server_local, test_server_local_users): a reply collected token by
// token, what of it shows up in other memory, a client connection, and the text HTTP gives for the same request.
#pragma once
#include <httplib.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>
#include <QtGlobal>
#include <string>
#include <string_view>
#include <vector>

#include "colibri_client.h"

namespace colibri::test {

struct Collected {
    std::string text;
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    std::vector<std::string> pieces;  // each token's text
    int cancel_after = -1;            // cancel after this many tokens (-1: never)
};

inline int collect(int32_t token, const char* text, size_t length, float logprob, void* user) {
    auto* c = static_cast<Collected*>(user);
    c->text.append(text, length);
    c->pieces.emplace_back(text, length);
    c->tokens.push_back(token);
    c->logprobs.push_back(logprob);
    return c->cancel_after < 0 || static_cast<int>(c->tokens.size()) < c->cancel_after;
}

// How many of a reply's token texts (three bytes or more) occur in bytes: a client's memory holds none of another's.
inline int leaked_pieces(const Collected& reply, std::string_view bytes) {
    int n = 0;
    for (const std::string& piece : reply.pieces) n += piece.size() >= 3 && bytes.find(piece) != std::string_view::npos;
    return n;
}

inline int long_pieces(const Collected& reply) {
    int n = 0;
    for (const std::string& piece : reply.pieces) n += piece.size() >= 3;
    return n;
}

// A client of the socket, or null (and why on the test's log).
inline colibri_client* connect_local(const QString& socket) {
    char error[256] = {};
    colibri_client* c = colibri_client_connect(socket.toUtf8().constData(), error, sizeof error);
    if (c == nullptr) qWarning("connect: %s", error);
    return c;
}

// The text HTTP gives for the same chat request.
inline std::string http_chat_text(int port, const std::string& body) {
    httplib::Client http("127.0.0.1", port);
    http.set_read_timeout(300, 0);
    auto res = http.Post("/v1/chat/completions", body, "application/json");
    if (!res || res->status != 200) return "(HTTP failed)";
    const QJsonObject j = QJsonDocument::fromJson(QByteArray::fromStdString(res->body)).object();
    return j["choices"].toArray()[0].toObject()["message"].toObject()["content"].toString().toStdString();
}

}  // namespace colibri::test
