// `zerosim report`: the HTML file opens in headless Chromium (Debian's chromium; scripts/test.sh
// installs it), every section renders, and a screenshot is kept for review
// (build/test-artifacts/report.png).
#include <gtest/gtest.h>

#include <filesystem>

#include "test_helpers.hpp"

using zerosim::test::run_zerosim;

namespace {

std::string q(const std::string& s) { return "'" + s + "'"; }

std::string chromium() {
    for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
        if (std::filesystem::exists(p)) return p;
    return "";
}

std::string browser_flags(const std::string& profile) {
    return " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking"
           " --disable-component-update --disable-sync --user-data-dir=" + q(profile);
}

TEST(Report, RendersInHeadlessChromium) {
    std::string browser = chromium();
    ASSERT_FALSE(browser.empty()) << "Chromium is needed for this test: apt-get install chromium (scripts/test.sh does)";
    std::string ref = zerosim::test::reference("deepspeed-v0.14.2-cpu");
    std::string html = zerosim::test::temp_file("report.html", "");
    auto r = run_zerosim("report --deepspeed 0.14.2 --ds-config " + q(ref + "/z3_default_w4/ds_config.json") + " --model " + q(ref + "/model.json") +
                         " --topology " + q(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/localhost.json") +
                         " --world 4 --steps 3 --measured " + q(ref + "/z3_default_w4/rank0.log") + " -o " + q(html));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    // Self-contained: nothing is fetched from the network.
    std::string text = zerosim::test::read_file(html);
    EXPECT_EQ(text.find("http://"), text.find("http://www.w3.org/2000/svg"));
    EXPECT_EQ(text.find("https://"), std::string::npos);

    std::string profile = ::testing::TempDir() + "/chromium-profile";
    std::string dom_file = ::testing::TempDir() + "/report-dom.html";
    std::string cmd = "timeout 90 " + browser + browser_flags(profile) + " --dump-dom file://" + html + " > " + q(dom_file) +
                      " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::string dom = zerosim::test::read_file(dom_file);
    for (const char* section : {"id=\"steps\"", "id=\"timeline\"", "id=\"memory\"", "id=\"explain\"", "id=\"ops\"", "id=\"measured\""})
        EXPECT_NE(dom.find(section), std::string::npos) << section;
    EXPECT_NE(dom.find("<rect"), std::string::npos);    // timeline bars
    EXPECT_NE(dom.find("id=\"gathered\""), std::string::npos);  // stage 3: host track and gathered counter
    EXPECT_NE(dom.find("<circle"), std::string::npos);  // predicted against measured points
    EXPECT_NE(dom.find("Why these collectives"), std::string::npos);
    EXPECT_NE(dom.find("Validation (zerosim validate)"), std::string::npos);  // the diff, with --measured
    EXPECT_NE(dom.find("0 missing, 0 extra, 0 resized, 0 swapped"), std::string::npos);

    std::filesystem::create_directories(ZEROSIM_ARTIFACTS_DIR);
    std::string png = std::string(ZEROSIM_ARTIFACTS_DIR) + "/report.png";
    std::filesystem::remove(png);
    cmd = "timeout 90 " + browser + browser_flags(profile) + " --window-size=1280,2400 --screenshot=" + q(png) + " file://" +
          html + " >/dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    ASSERT_TRUE(std::filesystem::exists(png));
    EXPECT_GT(std::filesystem::file_size(png), 20000u);  // a rendered page, not a blank one
}

}  // namespace
