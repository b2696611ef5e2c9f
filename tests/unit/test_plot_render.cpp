// `zerosim sweep --plot` as a person reads it (issue 19), rendered in headless Chromium: a script
// run in the page measures what was drawn and writes it into the DOM, which --dump-dom returns.
// Checked: each panel has its axis labels and tick labels, every series is in the legend and the
// legend is inside the picture, no line or marker lies outside its panel's frame, ticks never in
// e-notation, no text cut at the picture's edge or drawn over a title or note, one GPU-memory line
// per GPU size. A screenshot is kept (build/test-artifacts/sweep-plot.png).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "test_helpers.hpp"

using zerosim::test::run_zerosim;

namespace {

using zerosim::test::q;
using zerosim::test::chromium;

const char* kMeasure = R"(<script>
const out = [];
const near = 0.5;
const svg = document.querySelector('svg').getBoundingClientRect();
for (const p of document.querySelectorAll('g.panel')) {
  const f = p.querySelector('rect.frame').getBoundingClientRect();
  let outside = 0;
  for (const e of p.querySelectorAll('path.series, path.marker')) {
    const b = e.getBoundingClientRect();
    if (b.left < f.left - near || b.right > f.right + near || b.top < f.top - near || b.bottom > f.bottom + near) outside++;
  }
  const labels = (p.querySelector('text.xlabel') ? 1 : 0) + (p.querySelector('text.ylabel') ? 1 : 0);
  out.push('panel ' + p.id + ' xticks=' + p.querySelectorAll('text.xtick').length + ' yticks=' +
           p.querySelectorAll('text.ytick').length + ' labels=' + labels + ' outside=' + outside +
           ' series=' + new Set([...p.querySelectorAll('path.series')].map(e => e.dataset.series)).size);
}
let visible = 0;
const entries = document.querySelectorAll('g.legend g.entry');
for (const e of entries) {
  const b = e.getBoundingClientRect();
  if (b.width > 0 && b.left >= svg.left && b.right <= svg.right && b.top >= svg.top && b.bottom <= svg.bottom) visible++;
}
out.push('legend entries=' + entries.length + ' visible=' + visible);
// Every text inside the picture (nothing clipped at its edges), and no panel's title, notes or GPU
// labels overlapping one another.
let clipped = 0, overlaps = 0;
for (const t of document.querySelectorAll('text')) {
  const b = t.getBoundingClientRect();
  if (b.left < svg.left - near || b.right > svg.right + near || b.top < svg.top - near || b.bottom > svg.bottom + near) clipped++;
}
for (const p of document.querySelectorAll('g.panel')) {
  const boxes = [...p.querySelectorAll('text.title, text.note, text.gpu-memory-label')].map(e => e.getBoundingClientRect());
  for (let i = 0; i < boxes.length; i++)
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i], b = boxes[j];
      if (a.left < b.right - near && b.left < a.right - near && a.top < b.bottom - near && b.top < a.bottom - near) overlaps++;
    }
}
out.push('texts clipped=' + clipped + ' overlapping=' + overlaps + ' gpu lines=' + document.querySelectorAll('line.gpu-memory').length +
         ' notes=' + document.querySelectorAll('text.note').length);
document.body.insertAdjacentHTML('beforeend', '<pre id="measured">' + out.join('\n') + '</pre>');
</script>)";

TEST(PlotRender, AxesLegendAndFramesInHeadlessChromium) {
    std::string browser = chromium();
    ASSERT_FALSE(browser.empty()) << "Chromium is needed for this test: apt-get install chromium (scripts/test.sh does)";
    std::string root = std::string(ZEROSIM_CONFIGS_DIR) + "/..";
    std::string svg = zerosim::test::temp_file("render-sweep.svg", "");
    // Eight series: two stages x two bucket sizes on two topologies whose GPUs differ (A100 80 GB,
    // A100 40 GB), on 8 and 16 ranks; the notes say which series coincide (the bucket size changes
    // neither panel here), long enough to wrap.
    auto r = run_zerosim("sweep --deepspeed 0.14.2 --model " + q(zerosim::test::reference("deepspeed-v0.14.2-cpu/model.json")) +
                         " --topology " + q(root + "/topologies/dgx-a100.json") + " --topology " + q(root + "/topologies/aws-p4d.json") +
                         " --stages 1,3 --nodes 1,2 --set zero_optimization.reduce_bucket_size=50000,500000000 --jobs 2 -o /dev/null"
                         " --plot " + q(svg));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::string picture = zerosim::test::read_file(svg);
    EXPECT_FALSE(std::regex_search(picture, std::regex(">[-0-9.]+e[+-][0-9]+<"))) << "a tick in e-notation";
    EXPECT_NE(picture.find("stage 3, dgx-a100, reduce_bucket_size=50000"), std::string::npos);
    std::string html = zerosim::test::temp_file("render-sweep.html", "<!doctype html><html><body>" + picture + kMeasure + "</body></html>");
    std::string profile = ::testing::TempDir() + "/chromium-profile-plot";
    std::string flags = zerosim::test::headless_chromium_flags(profile);
    std::string dom_file = ::testing::TempDir() + "/render-sweep-dom.html";
    std::string cmd = "timeout 90 " + browser + flags + " --window-size=1000,1000 --dump-dom file://" + html + " > " + q(dom_file) +
                      " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::string dom = zerosim::test::read_file(dom_file);
    auto at = dom.rfind("<pre id=\"measured\">");   // the element the script added, not its source
    ASSERT_NE(at, std::string::npos) << "the page's script did not run";
    std::string measured = dom.substr(at, dom.find("</pre>", at) - at);
    for (const char* panel : {"step-time", "memory"}) {
        std::smatch m;
        std::string line = std::string("panel ") + panel + " xticks=([0-9]+) yticks=([0-9]+) labels=([0-9]+) outside=([0-9]+) series=([0-9]+)";
        ASSERT_TRUE(std::regex_search(measured, m, std::regex(line))) << measured;
        EXPECT_GE(std::stoi(m[1]), 2) << panel;    // 8 and 16 ranks
        EXPECT_GE(std::stoi(m[2]), 3) << panel;
        EXPECT_EQ(m[3], "2") << panel;             // both axis labels
        EXPECT_EQ(m[4], "0") << panel << ": drawn outside the frame";
        EXPECT_EQ(m[5], "8") << panel;
    }
    EXPECT_NE(measured.find("legend entries=8 visible=8"), std::string::npos) << measured;
    std::smatch t;
    ASSERT_TRUE(std::regex_search(measured, t, std::regex("texts clipped=([0-9]+) overlapping=([0-9]+) gpu lines=([0-9]+) notes=([0-9]+)")))
        << measured;
    EXPECT_EQ(t[1], "0") << "a text cut at the picture's edge:\n" << measured;
    EXPECT_EQ(t[2], "0") << "a title, note or GPU label drawn over another:\n" << measured;
    EXPECT_EQ(t[3], "2") << "one GPU-memory line per GPU size (80 GB and 40 GB)";
    EXPECT_GE(std::stoi(t[4]), 3) << "the identical series named, wrapped over lines:\n" << measured;

    std::filesystem::create_directories(ZEROSIM_ARTIFACTS_DIR);
    std::string png = std::string(ZEROSIM_ARTIFACTS_DIR) + "/sweep-plot.png";
    cmd = "timeout 90 " + browser + flags + " --window-size=940,900 --screenshot=" + q(png) + " file://" + svg + " >/dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    EXPECT_GT(std::filesystem::file_size(png), 10000u);
}

}  // namespace
