// placeholder: being written
#include <QtTest>
class Placeholder : public QObject { Q_OBJECT private slots: void nothing() {} };
QTEST_APPLESS_MAIN(Placeholder)
#include "test_chat_template.moc"
