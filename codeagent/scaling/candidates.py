"""What each candidate run is given: its config under the sampling schedule (temperatures, seeds and,
optionally, models cycled over the candidates) and its model. The runs themselves: runs.py."""

from __future__ import annotations

from collections.abc import Callable

from ..config import Config
from ..models import Model, model_from_settings
from ..sandbox import Sandbox

SandboxFactory = Callable[[], Sandbox]
ModelFactory = Callable[[str], Model]


def candidate_config(config: Config, index: int) -> Config:
    """The config of candidate `index` under the schedule: its model, temperature and seed."""
    schedule = config.scaling
    model = config.model.model_copy(update={
        "name": schedule.models[index % len(schedule.models)] if schedule.models else config.model.name,
        "temperature": schedule.temperatures[index % len(schedule.temperatures)] if schedule.temperatures
        else config.model.temperature,
        "seed": schedule.seeds[index % len(schedule.seeds)] if schedule.seeds else config.model.seed,
    })
    return config.model_copy(update={"model": model})


def default_model_factory(config: Config) -> ModelFactory:
    def build(name: str) -> Model:
        return model_from_settings(config.model, name)

    return build
