// `zerosim report`: the HTML file opens in headless Chromium (Debian's chromium; scripts/test.sh
// installs it), every section renders, and a screenshot is kept for review
// (build/test-artifacts/report.png).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "test_helpers.hpp"

using zerosim::test::run_zerosim;

namespace {

using zerosim::test::q;
using zerosim::test::chromium;

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
    std::string cmd = "timeout 90 " + browser + zerosim::test::headless_chromium_flags(profile) + " --dump-dom file://" + html + " > " + q(dom_file) +
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
    cmd = "timeout 90 " + browser + zerosim::test::headless_chromium_flags(profile) + " --window-size=1280,2400 --screenshot=" + q(png) + " file://" +
          html + " >/dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    ASSERT_TRUE(std::filesystem::exists(png));
    EXPECT_GT(std::filesystem::file_size(png), 20000u);  // a rendered page, not a blank one
}

// Issue 19: what a person reads, measured in the rendered page by a script that writes its
// findings into the DOM: the timeline has a time axis with its label and a legend of every bar
// colour, and no bar outside it; the measured chart has tick labels on both axes and no point
// outside its frame; the explanation is headings and lists, not "##" text; the collectives table
// holds every collective, grouped and folded per step and phase.
const char* kReportMeasure = R"(<script>
const out = [];
const inside = (b, f) => b.left >= f.left - 0.5 && b.right <= f.right + 0.5 && b.top >= f.top - 0.5 && b.bottom <= f.bottom + 0.5;
const t = document.getElementById('timeline-svg');
const tf = t.getBoundingClientRect();
out.push('timeline ticks=' + t.querySelectorAll('text.tick').length + ' xlabel=' + t.querySelectorAll('text.xlabel').length +
         ' legend=' + t.querySelectorAll('g.legend rect').length +
         ' outside=' + [...t.querySelectorAll('rect')].filter(r => !inside(r.getBoundingClientRect(), tf)).length);
const z = document.getElementById('timeline-layer-svg');
out.push('layer outside=' + (z ? [...z.querySelectorAll('rect')].filter(r => !inside(r.getBoundingClientRect(), z.getBoundingClientRect())).length : 'none'));
const c = document.getElementById('measured-chart');
const cf = c.querySelector('rect.frame').getBoundingClientRect();
out.push('chart xticks=' + c.querySelectorAll('text.xtick').length + ' yticks=' + c.querySelectorAll('text.ytick').length +
         ' labels=' + c.querySelectorAll('text.xlabel, text.ylabel').length + ' points=' + c.querySelectorAll('circle.point').length +
         ' outside=' + [...c.querySelectorAll('circle.point')].filter(p => !inside(p.getBoundingClientRect(), cf)).length);
const e = document.getElementById('explain');
out.push('explain h3=' + e.querySelectorAll('h3').length + ' li=' + e.querySelectorAll('li').length + ' hashes=' + (e.innerText.includes('##') ? 1 : 0));
const ops = document.getElementById('ops');
out.push('ops groups=' + ops.querySelectorAll('details').length + ' rows=' + (ops.querySelectorAll('tr').length - ops.querySelectorAll('details').length));
document.body.insertAdjacentHTML('beforeend', '<pre id="measured-report">' + out.join('\n') + '</pre>');
</script>)";

TEST(Report, ReadableInHeadlessChromium) {
    std::string browser = chromium();
    ASSERT_FALSE(browser.empty()) << "Chromium is needed for this test: apt-get install chromium (scripts/test.sh does)";
    std::string ref = zerosim::test::reference("deepspeed-v0.14.2-cpu");
    std::string html = zerosim::test::temp_file("report-readable.html", "");
    auto r = run_zerosim("report --deepspeed 0.14.2 --ds-config " + q(ref + "/z3_default_w4/ds_config.json") + " --model " +
                         q(ref + "/model.json") + " --topology " + q(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/localhost.json") +
                         " --world 4 --steps 3 --measured " + q(ref + "/z3_default_w4/rank0.log") + " -o " + q(html));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::string text = zerosim::test::read_file(html);
    std::smatch total;
    ASSERT_TRUE(std::regex_search(text, total, std::regex("<p>([0-9]+) collectives in all.</p>")));
    const std::string collectives = total[1].str();   // before the text changes under the match
    text.insert(text.rfind("</body>"), kReportMeasure);
    std::string page = zerosim::test::temp_file("report-readable-measured.html", text);
    std::string profile = ::testing::TempDir() + "/chromium-profile-readable";
    std::string dom_file = ::testing::TempDir() + "/report-readable-dom.html";
    std::string cmd = "timeout 90 " + browser + zerosim::test::headless_chromium_flags(profile) + " --window-size=1280,2400 --dump-dom file://" + page +
                      " > " + q(dom_file) + " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::string dom = zerosim::test::read_file(dom_file);
    auto at = dom.rfind("<pre id=\"measured-report\">");
    ASSERT_NE(at, std::string::npos) << "the page's script did not run";
    std::string m = dom.substr(at, dom.find("</pre>", at) - at);
    std::smatch g;
    ASSERT_TRUE(std::regex_search(m, g, std::regex("timeline ticks=([0-9]+) xlabel=1 legend=6 outside=0"))) << m;
    EXPECT_GE(std::stoi(g[1]), 3);
    EXPECT_NE(m.find("layer outside=0"), std::string::npos) << m;   // one layer zoomed, its bars clamped to the window
    ASSERT_TRUE(std::regex_search(m, g, std::regex("chart xticks=([0-9]+) yticks=([0-9]+) labels=2 points=([0-9]+) outside=0"))) << m;
    EXPECT_GE(std::stoi(g[1]), 2);
    EXPECT_GE(std::stoi(g[2]), 2);
    EXPECT_GT(std::stoi(g[3]), 50);   // the matched ops of three steps
    ASSERT_TRUE(std::regex_search(m, g, std::regex("explain h3=([0-9]+) li=([0-9]+) hashes=0"))) << m;
    EXPECT_GE(std::stoi(g[1]), 5);
    ASSERT_TRUE(std::regex_search(m, g, std::regex("ops groups=([0-9]+) rows=([0-9]+)"))) << m;
    EXPECT_GE(std::stoi(g[1]), 4);                  // engine start and three steps, at least
    EXPECT_EQ(g[2].str(), collectives);             // every collective has its row
}

}  // namespace
