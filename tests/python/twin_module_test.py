"""`import twin` (python/twin_module.cpp), run by ctest with PYTHONPATH at the built module: a simulation's ranking
rows, best plan and report; twin.ScenarioError with its JSON path; the same results twice; a sweep; nothing on
stdout."""
import contextlib
import copy
import io
import os
import tempfile
import unittest

import twin

SMALL = {
    "name": "small",
    "model": {"preset": "llama2-7b", "num_layers": 4},
    "training": {"seq_length": 2048, "global_batch_size": 8},
    "cluster": {"nodes": [{"count": 1, "gpu": "H100-SXM-80GB", "gpus_per_node": 4,
                           "nics": {"count": 4, "bandwidth_Gbps": 400}}]},
    "search": {"tensor_model_parallel_size": [1, 2], "pipeline_model_parallel_size": [1],
               "micro_batch_size": [1], "zero_stage": [1], "recompute": ["none"]},
    "cost": {"price_per_gpu_hour": 2.0, "tokens_to_train": 1e9},
}


class TwinModuleTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="twin-python-")
        self.addCleanup(self.dir.cleanup)

    def out(self, name):
        return os.path.join(self.dir.name, name)

    def test_simulate_gives_rows_best_plan_and_report(self):
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            results = twin.simulate(SMALL, out=self.out("a"), top=0)
        self.assertEqual(stdout.getvalue(), "")
        ranking = results["ranking"]
        self.assertGreaterEqual(len(ranking), 2)
        first = ranking[0]
        self.assertEqual(first["place"], 1)
        self.assertIs(first["feasible"], True)
        self.assertIsInstance(first["tokens_per_s"], float)
        self.assertGreater(first["cost_per_million_tokens_USD"], 0)
        self.assertEqual(results["best"]["strategy"]["tensor_model_parallel_size"],
                         first["tensor_model_parallel_size"])
        self.assertTrue(os.path.isfile(results["report"]))
        self.assertIsNone(results["message"])

    def test_bad_input_raises_scenario_error_with_its_json_path(self):
        bad = copy.deepcopy(SMALL)
        bad["training"]["seq_length"] = -1
        with self.assertRaises(twin.ScenarioError) as raised:
            twin.simulate(bad, out=self.out("bad"))
        self.assertIsInstance(raised.exception, ValueError)
        self.assertEqual(raised.exception.json_path, "/training/seq_length")
        self.assertIn("at /training/seq_length: expected", str(raised.exception))
        self.assertFalse(os.path.exists(os.path.join(self.out("bad"), "ranking.csv")))

    def test_same_input_same_results(self):
        one = twin.simulate(SMALL, out=self.out("one"), top=0, jobs=1)
        two = twin.simulate(SMALL, out=self.out("two"), top=0, jobs=2)
        self.assertEqual(one["ranking"], two["ranking"])
        self.assertEqual(one["best"], two["best"])
        with open(os.path.join(one["out"], "ranking.csv"), "rb") as a, \
                open(os.path.join(two["out"], "ranking.csv"), "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_sweep_gives_a_row_per_point(self):
        scenario = dict(SMALL, sweep={"nodes": [1, 2]})
        results = twin.sweep(scenario, out=self.out("sweep"), top=0)
        self.assertEqual([row["nodes"] for row in results["points"]], [1, 2])
        self.assertEqual([row["gpus"] for row in results["points"]], [4, 8])
        self.assertTrue(os.path.isfile(results["report"]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
