#include "ui/theme.h"

#include <QAbstractAxis>
#include <QApplication>
#include <QChart>
#include <QDBusConnection>
#include <QDBusMessage>
#include <QDBusVariant>
#include <QLegend>
#include <QStyle>
#include <QStyleFactory>

#include "ui/colors.h"

namespace colibri::studio {

namespace {

const QString kPortalService = QStringLiteral("org.freedesktop.portal.Desktop");
const QString kPortalPath = QStringLiteral("/org/freedesktop/portal/desktop");
const QString kPortalSettings = QStringLiteral("org.freedesktop.portal.Settings");
const QString kAppearance = QStringLiteral("org.freedesktop.appearance");
const QString kColorScheme = QStringLiteral("color-scheme");

// The portal answers Read with the value wrapped in one or two variants, depending on its version.
QVariant unwrap(QVariant v) {
    for (int i = 0; i < 3 && v.canConvert<QDBusVariant>(); ++i) v = v.value<QDBusVariant>().variant();
    return v;
}

// 1 prefer dark, 2 prefer light, 0 no preference; -1 when there is no portal to ask.
int portal_color_scheme() {
    QDBusConnection bus = QDBusConnection::sessionBus();
    if (!bus.isConnected()) return -1;
    QDBusMessage call = QDBusMessage::createMethodCall(kPortalService, kPortalPath, kPortalSettings, QStringLiteral("Read"));
    call << kAppearance << kColorScheme;
    const QDBusMessage reply = bus.call(call, QDBus::Block, 500);  // a missing portal must not hold the start up
    if (reply.type() != QDBusMessage::ReplyMessage || reply.arguments().isEmpty()) return -1;
    bool ok = false;
    const int v = unwrap(reply.arguments().front()).toInt(&ok);
    return ok ? v : -1;
}

}  // namespace

QPalette dark_application_palette() {
    QPalette p;
    const QColor window(45, 45, 48), base(30, 30, 32), text(230, 230, 230), disabled(128, 128, 128);
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, QColor(40, 40, 43));
    p.setColor(QPalette::ToolTipBase, QColor(55, 55, 60));
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::PlaceholderText, QColor(150, 150, 150));
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, QColor(53, 53, 57));
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, QColor(255, 90, 90));
    p.setColor(QPalette::Light, QColor(75, 75, 80));
    p.setColor(QPalette::Midlight, QColor(62, 62, 66));
    p.setColor(QPalette::Mid, QColor(40, 40, 42));
    p.setColor(QPalette::Dark, QColor(25, 25, 27));
    p.setColor(QPalette::Shadow, QColor(10, 10, 10));
    p.setColor(QPalette::Link, QColor(110, 170, 255));
    p.setColor(QPalette::LinkVisited, QColor(170, 140, 255));
    p.setColor(QPalette::Highlight, QColor(42, 120, 210));
    p.setColor(QPalette::HighlightedText, Qt::white);
    for (QPalette::ColorRole r : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, r, disabled);
    p.setColor(QPalette::Disabled, QPalette::Highlight, QColor(80, 80, 80));
    return p;
}

bool desktop_prefers_dark() {
    const int portal = portal_color_scheme();
    if (portal == 1) return true;
    if (portal == 2) return false;
    if (qEnvironmentVariable("GTK_THEME").endsWith(QLatin1String(":dark"), Qt::CaseInsensitive)) return true;
    // A platform theme (KDE, qt6ct) that hands out a dark palette already.
    const QPalette p = QApplication::style() ? QApplication::style()->standardPalette() : QPalette();
    return QGuiApplication::palette().color(QPalette::Window).lightness() < 100 && p.color(QPalette::Window).lightness() < 100;
}

ThemeManager::ThemeManager(QObject* parent) : QObject(parent) {
    light_palette_ = QGuiApplication::palette();
    light_style_ = QApplication::style() ? QApplication::style()->name() : QString();
    desktop_dark_ = desktop_prefers_dark();
    const QString forced = qEnvironmentVariable("COLIBRI_COLOR_SCHEME").toLower();
    if (forced == QLatin1String("dark")) scheme_ = ColorScheme::Dark;
    if (forced == QLatin1String("light")) scheme_ = ColorScheme::Light;
    QDBusConnection bus = QDBusConnection::sessionBus();
    if (bus.isConnected())
        bus.connect(kPortalService, kPortalPath, kPortalSettings, QStringLiteral("SettingChanged"), this,
                    SLOT(on_portal_setting(QString, QString, QDBusVariant)));
    apply();
}

void ThemeManager::set_scheme(ColorScheme scheme) {
    scheme_ = scheme;
    apply();
}

void ThemeManager::set_desktop_dark(bool dark) {
    desktop_dark_ = dark;
    if (scheme_ == ColorScheme::FollowDesktop) apply();
}

void ThemeManager::on_portal_setting(const QString& ns, const QString& key, const QDBusVariant& value) {
    if (ns != kAppearance || key != kColorScheme) return;
    set_desktop_dark(unwrap(value.variant()).toInt() == 1);
}

void ThemeManager::apply() {
    const bool dark = scheme_ == ColorScheme::Dark || (scheme_ == ColorScheme::FollowDesktop && desktop_dark_);
    if (dark == dark_ && QApplication::style() != nullptr && dark_ == dark_palette()) return;
    dark_ = dark;
    if (dark) {
        // Fusion draws with the palette everywhere; some native styles keep their own light colours.
        QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
        QApplication::setPalette(dark_application_palette());
    } else {
        if (!light_style_.isEmpty() && QApplication::style()->name() != light_style_) QApplication::setStyle(QStyleFactory::create(light_style_));
        QApplication::setPalette(light_palette_);
    }
    emit changed(dark);
}

void style_chart(QChart* chart) {
    if (chart == nullptr) return;
    const QPalette p = QGuiApplication::palette();
    const QColor text = p.color(QPalette::WindowText), grid = blend(p.color(QPalette::Base), text, 0.18);
    chart->setBackgroundBrush(p.color(QPalette::Base));
    chart->setBackgroundPen(Qt::NoPen);
    chart->setPlotAreaBackgroundVisible(false);
    chart->setTitleBrush(text);
    if (chart->legend()) chart->legend()->setLabelColor(text);
    for (QAbstractAxis* a : chart->axes()) {
        a->setLabelsBrush(text);
        a->setTitleBrush(text);
        a->setLinePenColor(blend(p.color(QPalette::Base), text, 0.5));
        a->setGridLineColor(grid);
        a->setMinorGridLineColor(blend(p.color(QPalette::Base), text, 0.08));
    }
}

}  // namespace colibri::studio
