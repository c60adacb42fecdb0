// Light or dark: the Studio follows the desktop's colour scheme unless the user picks one (View ▸ Colours,
// or COLIBRI_COLOR_SCHEME=light|dark). The desktop's preference is read where desktops publish it: the
// xdg-desktop-portal setting org.freedesktop.appearance color-scheme (GNOME 42+, KDE Plasma 5.24+; followed
// live through its SettingChanged signal), GTK_THEME ending in ":dark", or a platform theme whose palette is
// dark already. Dark is the Fusion style with a dark palette; every view draws with palette colours, and the
// charts are restyled when the palette changes (style_chart).
#pragma once
#include <QObject>
#include <QPalette>

class QChart;
class QDBusVariant;

namespace colibri::studio {

enum class ColorScheme { FollowDesktop, Light, Dark };

QPalette dark_application_palette();
// The desktop's wish, as far as it can be read: true for dark.
bool desktop_prefers_dark();

// Owns the choice and applies it to the application; one per application (made by the main window).
class ThemeManager : public QObject {
    Q_OBJECT
public:
    explicit ThemeManager(QObject* parent = nullptr);
    void set_scheme(ColorScheme scheme);
    ColorScheme scheme() const { return scheme_; }
    bool dark() const { return dark_; }
    // Tests and the portal signal: what the desktop says now (FollowDesktop re-applies with it).
    void set_desktop_dark(bool dark);

signals:
    void changed(bool dark);

private slots:
    void on_portal_setting(const QString& ns, const QString& key, const QDBusVariant& value);

private:
    void apply();
    ColorScheme scheme_ = ColorScheme::FollowDesktop;
    bool desktop_dark_ = false;
    bool dark_ = false;
    QPalette light_palette_;
    QString light_style_;
};

// Backgrounds, text, axes and grid of a chart in the application's palette; call after axes are added.
void style_chart(QChart* chart);

}  // namespace colibri::studio
