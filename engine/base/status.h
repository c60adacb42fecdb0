// Errors are values at module borders: a Status or a Result<T>, turned into one-line messages by the CLI.
#pragma once
#include <algorithm>
#include <string>
#include <utility>
#include <variant>

namespace colibri {

class Status {
public:
    Status() = default;
    static Status ok() { return {}; }
    static Status error(std::string what) { Status s; s.failed_ = true; s.message_ = one_line(std::move(what)); return s; }
    bool is_ok() const { return !failed_; }
    explicit operator bool() const { return !failed_; }
    const std::string& message() const { return message_; }
    Status status() const { return *this; }
private:
    // Messages stay one line whatever input they quote (a tensor name or a JSON key from a damaged file):
    // control characters become \xNN, so a file can neither split the CLI's error line nor send escapes.
    static std::string one_line(std::string s) {
        const auto is_control = [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; };
        if (std::none_of(s.begin(), s.end(), is_control)) return s;
        static const char hex[] = "0123456789abcdef";
        std::string out;
        for (const char c : s) {
            if (!is_control(c)) {
                out += c;
                continue;
            }
            const auto b = static_cast<unsigned char>(c);
            out += {'\\', 'x', hex[b >> 4], hex[b & 15]};
        }
        return out;
    }
    bool failed_ = false;
    std::string message_;
};

template <typename T>
class Result {
public:
    Result(T value) : v_(std::move(value)) {}
    Result(Status error) : v_(std::move(error)) {}
    bool is_ok() const { return v_.index() == 0; }
    explicit operator bool() const { return is_ok(); }
    T& value() & { return std::get<0>(v_); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    // Empty when the result holds a value.
    const std::string& message() const {
        static const std::string none;
        return is_ok() ? none : std::get<1>(v_).message();
    }
    Status status() const { return is_ok() ? Status::ok() : std::get<1>(v_); }
private:
    std::variant<T, Status> v_;
};

inline Status error(std::string what) { return Status::error(std::move(what)); }

}  // namespace colibri

// Propagate a failed Status/Result from the current function.
#define COLIBRI_TRY(expr)                                  \
    do {                                                   \
        auto colibri_try_status_ = (expr);                 \
        if (!colibri_try_status_) return colibri_try_status_.status(); \
    } while (0)
