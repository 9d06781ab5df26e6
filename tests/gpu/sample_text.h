// SPDX-License-Identifier: Apache-2.0
// An English passage (our own words) for the GPU checks that need real text: repeated, it gives
// the model confident predictions, so CPU-vs-GPU comparisons are not dominated by near-ties.
#pragma once

namespace sinkscope::gpu_test {

inline constexpr const char* kText =
    "The lighthouse keeper woke before dawn, as he had every morning for thirty years. He climbed "
    "the spiral stairs with a lantern in one hand and a mug of black coffee in the other, counting "
    "the steps out of habit: one hundred and twelve. At the top, the great lens waited under its "
    "canvas cover, and beyond the glass the sea was the colour of slate. Ships no longer needed "
    "him, "
    "strictly speaking. Satellites told every captain where the rocks were, and the light itself "
    "had been automated a decade ago. Still, the harbour board paid him to stay, partly out of "
    "tradition and partly because storms had a way of breaking things that computers could not "
    "fix. "
    "That morning he noticed a small boat drifting near the northern reef, its sail torn and its "
    "deck empty. He reached for the radio and called the coast guard, describing the position, the "
    "wind, and the state of the tide. Then he took out the old logbook and wrote down the time, "
    "because that was what keepers had always done. Writing things down, his predecessor used to "
    "say, is how you remember that the world happened at all. By nine o'clock a rescue launch had "
    "reached the drifting boat. There was nobody aboard, only a wet notebook wrapped in plastic, a "
    "compass, and three apples. The coast guard brought the notebook to the lighthouse, since it "
    "was the nearest dry place, and the keeper dried its pages one by one on the warm metal of the "
    "lamp housing. The handwriting was careful and small. It described a journey along the coast, "
    "the birds seen each day, the weather, the fish caught and released. The last entry said only "
    "that the writer had gone ashore to look for fresh water and would be back before dark. Two "
    "days later a young woman walked into the village, sunburnt and hungry, asking whether anyone "
    "had seen a blue boat with a red stripe. The keeper invited her up the hundred and twelve "
    "steps, "
    "handed her the notebook, and poured her a cup of coffee while she laughed and cried at once.";

}  // namespace sinkscope::gpu_test
