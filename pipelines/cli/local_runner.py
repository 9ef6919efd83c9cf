"""The DirectRunner as zerda runs it: Beam's FnApiRunner, always, never Prism.

Beam's DirectRunner (2.77) first tries Prism, a Go binary it downloads from GitHub at run time. Where
GitHub is reachable the job would run on an engine the tests never ran (Prism ignores
``--direct_running_mode`` and ``--direct_num_workers``); where it is not, the attempt costs a second
conversion of the pipeline and a failed download on every run, or hangs for the TCP timeout
behind a firewall that drops packets. Prism stays one ``--runner PrismRunner`` away.
"""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.pipeline import Pipeline
from apache_beam.portability.api import beam_provision_api_pb2
from apache_beam.runners.direct.direct_runner import DirectRunner
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.runners.portability.portable_runner import JobServiceHandle
from apache_beam.runners.runner import PipelineResult


class FnApiDirectRunner(DirectRunner):
    """A DirectRunner that runs a batch pipeline on the FnApiRunner, as the DirectRunner does once Prism
    fails: the same options reach the workers (``multi_processing`` included) through the provision info."""

    def is_fnapi_compatible(self) -> bool:
        """True: ``Pipeline.run`` skips its test round trip through the runner API, as for Beam's DirectRunner
        (it recognises that one by its class name), since the FnApiRunner converts the pipeline anyway."""
        return True

    def run_pipeline(self, pipeline: Pipeline, options: PipelineOptions) -> PipelineResult:
        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        provision = fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
        return fn_runner.FnApiRunner(provision_info=provision).run_pipeline(pipeline, options)
