"""The one counter (translator.batch.counting) on stand-ins for tensors, models and optimizers: what a
batch's rows are, when a step closes, and how replicas add up."""

from types import SimpleNamespace

from translator.batch.counting import StepCounter, TrainerCounter, all_ranks, replica_totals


def tensor(*shape):
    return SimpleNamespace(shape=shape)


def test_rows_are_the_first_dimension_of_the_first_tensor():
    counter = StepCounter()
    batches = [tensor(4, 16), (tensor(2, 16), tensor(2, 16)), {"input_ids": tensor(3, 8)}, None]
    assert list(counter.count(batches)) == batches
    counter.stepped("SGD")
    assert counter.samples == [9] and counter.tokens == [4 * 16 + 2 * 16 + 3 * 8]
    assert len(counter.times) == 1


def test_packed_rows_count_the_samples_they_hold():
    counter = StepCounter()
    counter.add(tensor(2, 64), samples=7)
    counter.add(tensor(2, 64), samples=6)
    counter.stepped("SGD")
    counter.add(tensor(3, 8))
    counter.stepped("SGD")
    assert counter.samples == [13, 3] and counter.rows == [4, 3]
    assert counter.tokens == [4 * 64, 3 * 8]


def test_a_step_closes_on_the_optimizers_own_step_and_starts_afresh():
    counter = StepCounter()
    hooks = []
    counter.watch(SimpleNamespace(register_step_post_hook=hooks.append))
    for rows in (2, 3):
        counter.add(tensor(rows, 1))
        counter.add(tensor(rows, 1))
        hooks[0]()
    assert counter.samples == [4, 6]


def test_only_training_forwards_count():
    counter = StepCounter()
    counter.forward(SimpleNamespace(training=True), (), {"input_ids": tensor(5, 2)})
    counter.forward(SimpleNamespace(training=True), (tensor(1, 2),), {})
    counter.forward(SimpleNamespace(training=False), (), {"input_ids": tensor(7, 2)})
    counter.stepped("x")
    assert counter.samples == [6]


def test_the_trainer_callback_hooks_the_model_once_and_names_what_stepped():
    hooks = []

    def register(fn, with_kwargs):
        hooks.append(fn)
        return SimpleNamespace(remove=hooks.clear)

    model = SimpleNamespace(register_forward_pre_hook=register)

    class Named(TrainerCounter):
        def stepped(self, by):
            self.by = by
            super().stepped(by)

    class DeepSpeedEngine:
        pass

    counter = Named()
    counter.trainer = SimpleNamespace(model_wrapped=DeepSpeedEngine())
    control = object()
    for _ in range(2):
        assert counter.on_train_begin(None, None, control, model=model) is control
    assert hooks == [counter.forward]
    assert counter.on_evaluate(None, None, control, metrics={}) is control  # any other event
    counter.on_step_end(None, None, control)
    assert counter.samples == [0] and counter.by == "Trainer (DeepSpeedEngine)"
    counter.stop()
    assert hooks == [] and not counter.counting


def test_replicas_add_up_and_a_shared_batch_counts_once():
    assert replica_totals([[4, 4, 4], [4, 4]], 2) == [8, 8]
    assert all_ranks(12, shared_by=2) == 6  # no process group: this process alone
