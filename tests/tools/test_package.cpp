// `cpack -G DEB` of the build: the package holds the CLI, the Studio, the desktop entry, the AppStream
// metainfo (valid for appstreamcli), the icon and a MIME type for .bin models whose magic matches a real model;
// installed into a temporary root, its binaries run (the Studio offscreen, taking a screenshot).
#include <QDir>
#include <QDirIterator>
#include <QImage>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QXmlStreamReader>
#include <QtTest>

#include "../test_support.h"

using namespace colibri::test;

namespace {

struct Run {
    int exit_code = -1;
    QByteArray out, err;
};

Run run(const QString& program, const QStringList& args, int timeout_ms = 600000, const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(program, args);
    Run r;
    if (!p.waitForStarted()) return r;
    if (!p.waitForFinished(timeout_ms)) {
        p.kill();
        p.waitForFinished();
        return r;
    }
    r.exit_code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}

}  // namespace

class TestPackage : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString root_;

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        const QString out = dir_.filePath(QStringLiteral("pkg"));
        const Run pack = run(QStringLiteral(COLIBRI_CPACK), {"-G", "DEB", "-B", out, "--config", QStringLiteral(COLIBRI_BUILD_DIR "/CPackConfig.cmake")});
        QVERIFY2(pack.exit_code == 0, (pack.out + pack.err).constData());
        const QStringList debs = QDir(out).entryList({QStringLiteral("*.deb")}, QDir::Files);
        QCOMPARE(debs.size(), 1);
        const QString deb = QDir(out).filePath(debs.front());
        const Run info = run(QStringLiteral("dpkg-deb"), {"-f", deb, "Package", "Version", "Depends"});
        QVERIFY2(info.exit_code == 0, info.err.constData());
        QVERIFY2(info.out.contains("Package: colibri") && info.out.contains("Version: 0.1.0"), info.out.constData());
#ifdef COLIBRI_HAVE_STUDIO
        QVERIFY2(info.out.contains("libqt6widgets6"), info.out.constData());  // dpkg-shlibdeps found the Studio's libraries
#endif
        root_ = dir_.filePath(QStringLiteral("root"));
        const Run extract = run(QStringLiteral("dpkg-deb"), {"-x", deb, root_});
        QVERIFY2(extract.exit_code == 0, extract.err.constData());
    }

    void installs_the_cli() {
        const QString colibri = root_ + QStringLiteral("/usr/bin/colibri");
        QVERIFY(QFileInfo(colibri).isExecutable());
        const Run version = run(colibri, {"--version"});
        QCOMPARE(version.exit_code, 0);
        QVERIFY(version.out.contains("colibri 0.1.0"));
        const Run info = run(colibri, {"info", QStringLiteral(COLIBRI_DEMO_MODEL), "--json"});
        QVERIFY2(info.exit_code == 0, info.err.constData());
        QVERIFY(QJsonDocument::fromJson(info.out).isObject());
        QVERIFY(QFileInfo::exists(root_ + QStringLiteral("/usr/include/colibri/colibri.h")));
    }

#ifdef COLIBRI_HAVE_STUDIO
    void desktop_integration_files() {
        const QString share = root_ + QStringLiteral("/usr/share");
        const QString desktop = share + QStringLiteral("/applications/colibri-studio.desktop");
        const QString metainfo = share + QStringLiteral("/metainfo/io.colibri.Studio.metainfo.xml");
        for (const QString& f : {desktop, metainfo, share + QStringLiteral("/icons/hicolor/scalable/apps/colibri-studio.svg"),
                                 share + QStringLiteral("/icons/hicolor/256x256/apps/colibri-studio.png"),
                                 share + QStringLiteral("/mime/packages/colibri-studio.xml")})
            QVERIFY2(QFileInfo::exists(f), qPrintable(f));
        QCOMPARE(QImage(share + QStringLiteral("/icons/hicolor/256x256/apps/colibri-studio.png")).size(), QSize(256, 256));
        // AppStream: valid, offline (no URL checks).
        const QString appstreamcli = QStandardPaths::findExecutable(QStringLiteral("appstreamcli"));
        QVERIFY2(!appstreamcli.isEmpty(), "appstreamcli is installed by tools/install-deps.sh (package appstream)");
        const Run valid = run(appstreamcli, {"validate", "--no-net", metainfo});
        QVERIFY2(valid.exit_code == 0, (valid.out + valid.err).constData());
        if (const QString dfv = QStandardPaths::findExecutable(QStringLiteral("desktop-file-validate")); !dfv.isEmpty()) {
            const Run d = run(dfv, {desktop});
            QVERIFY2(d.exit_code == 0 && d.out.trimmed().isEmpty(), (d.out + d.err).constData());
        }
        // The desktop entry's MIME type is the one the package defines, and its magic is what a model starts with.
        const QByteArray entry = read_all(desktop);
        QVERIFY(entry.contains("MimeType=application/x-colibri-model;"));
        QVERIFY(entry.contains("Exec=colibri-studio %f") && entry.contains("Icon=colibri-studio"));
        QXmlStreamReader xml(read_all(share + QStringLiteral("/mime/packages/colibri-studio.xml")));
        QString type, magic;
        while (!xml.atEnd()) {
            xml.readNext();
            if (xml.isStartElement() && xml.name() == QLatin1String("mime-type")) type = xml.attributes().value("type").toString();
            if (xml.isStartElement() && xml.name() == QLatin1String("match")) magic = xml.attributes().value("value").toString();
        }
        QVERIFY2(!xml.hasError(), qPrintable(xml.errorString()));
        QCOMPARE(type, QStringLiteral("application/x-colibri-model"));
        QVERIFY(!magic.isEmpty());
        QVERIFY(read_all(QStringLiteral(COLIBRI_DEMO_MODEL)).startsWith(magic.toLatin1()));
        // shared-mime-info compiles it.
        if (const QString update = QStandardPaths::findExecutable(QStringLiteral("update-mime-database")); !update.isEmpty()) {
            const Run u = run(update, {share + QStringLiteral("/mime")});
            QVERIFY2(u.exit_code == 0, u.err.constData());
            QVERIFY(QFileInfo::exists(share + QStringLiteral("/mime/application/x-colibri-model.xml")));
        }
    }

    void installed_studio_runs() {
        const QString studio = root_ + QStringLiteral("/usr/bin/colibri-studio");
        QVERIFY(QFileInfo(studio).isExecutable());
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
        const Run version = run(studio, {"--version"}, 60000, env);
        QVERIFY2(version.exit_code == 0 && version.out.contains("0.1.0"), (version.out + version.err).constData());
        const QString shots = dir_.filePath(QStringLiteral("shots"));
        const Run shot = run(studio, {"--screenshot", shots, "--geometry", "1280x720", QStringLiteral(COLIBRI_DEMO_MODEL)}, 600000, env);
        QVERIFY2(shot.exit_code == 0, shot.err.constData());
        QCOMPARE(QImage(QDir(shots).filePath(QStringLiteral("main.png"))).size(), QSize(1280, 720));
    }
#endif
};

QTEST_GUILESS_MAIN(TestPackage)
#include "test_package.moc"
