from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EnvSpec(_message.Message):
    __slots__ = ("env_id", "obs_shape", "obs_dtype", "action_shape", "action_dtype", "action_low", "action_high", "frame_stack", "state_dim")
    ENV_ID_FIELD_NUMBER: _ClassVar[int]
    OBS_SHAPE_FIELD_NUMBER: _ClassVar[int]
    OBS_DTYPE_FIELD_NUMBER: _ClassVar[int]
    ACTION_SHAPE_FIELD_NUMBER: _ClassVar[int]
    ACTION_DTYPE_FIELD_NUMBER: _ClassVar[int]
    ACTION_LOW_FIELD_NUMBER: _ClassVar[int]
    ACTION_HIGH_FIELD_NUMBER: _ClassVar[int]
    FRAME_STACK_FIELD_NUMBER: _ClassVar[int]
    STATE_DIM_FIELD_NUMBER: _ClassVar[int]
    env_id: str
    obs_shape: _containers.RepeatedScalarFieldContainer[int]
    obs_dtype: str
    action_shape: _containers.RepeatedScalarFieldContainer[int]
    action_dtype: str
    action_low: _containers.RepeatedScalarFieldContainer[float]
    action_high: _containers.RepeatedScalarFieldContainer[float]
    frame_stack: int
    state_dim: int
    def __init__(self, env_id: _Optional[str] = ..., obs_shape: _Optional[_Iterable[int]] = ..., obs_dtype: _Optional[str] = ..., action_shape: _Optional[_Iterable[int]] = ..., action_dtype: _Optional[str] = ..., action_low: _Optional[_Iterable[float]] = ..., action_high: _Optional[_Iterable[float]] = ..., frame_stack: _Optional[int] = ..., state_dim: _Optional[int] = ...) -> None: ...

class HandshakeRequest(_message.Message):
    __slots__ = ("actor_id", "spec", "incarnation")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    spec: EnvSpec
    incarnation: int
    def __init__(self, actor_id: _Optional[str] = ..., spec: _Optional[_Union[EnvSpec, _Mapping]] = ..., incarnation: _Optional[int] = ...) -> None: ...

class HandshakeReply(_message.Message):
    __slots__ = ("session_id", "policy_version", "max_batch", "learner_id", "ingest_port", "state_dim")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_FIELD_NUMBER: _ClassVar[int]
    LEARNER_ID_FIELD_NUMBER: _ClassVar[int]
    INGEST_PORT_FIELD_NUMBER: _ClassVar[int]
    STATE_DIM_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    policy_version: int
    max_batch: int
    learner_id: str
    ingest_port: int
    state_dim: int
    def __init__(self, session_id: _Optional[int] = ..., policy_version: _Optional[int] = ..., max_batch: _Optional[int] = ..., learner_id: _Optional[str] = ..., ingest_port: _Optional[int] = ..., state_dim: _Optional[int] = ...) -> None: ...

class TransitionBatch(_message.Message):
    __slots__ = ("session_id", "actor_id", "seq", "policy_version", "count", "obs", "action", "reward", "next_obs", "terminated", "discount", "frames", "first_frame", "frame_prev", "obs_frame", "next_frame", "frame_state")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    OBS_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    NEXT_OBS_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_FIELD_NUMBER: _ClassVar[int]
    DISCOUNT_FIELD_NUMBER: _ClassVar[int]
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    FIRST_FRAME_FIELD_NUMBER: _ClassVar[int]
    FRAME_PREV_FIELD_NUMBER: _ClassVar[int]
    OBS_FRAME_FIELD_NUMBER: _ClassVar[int]
    NEXT_FRAME_FIELD_NUMBER: _ClassVar[int]
    FRAME_STATE_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    actor_id: str
    seq: int
    policy_version: int
    count: int
    obs: bytes
    action: bytes
    reward: bytes
    next_obs: bytes
    terminated: bytes
    discount: bytes
    frames: bytes
    first_frame: int
    frame_prev: bytes
    obs_frame: bytes
    next_frame: bytes
    frame_state: bytes
    def __init__(self, session_id: _Optional[int] = ..., actor_id: _Optional[str] = ..., seq: _Optional[int] = ..., policy_version: _Optional[int] = ..., count: _Optional[int] = ..., obs: _Optional[bytes] = ..., action: _Optional[bytes] = ..., reward: _Optional[bytes] = ..., next_obs: _Optional[bytes] = ..., terminated: _Optional[bytes] = ..., discount: _Optional[bytes] = ..., frames: _Optional[bytes] = ..., first_frame: _Optional[int] = ..., frame_prev: _Optional[bytes] = ..., obs_frame: _Optional[bytes] = ..., next_frame: _Optional[bytes] = ..., frame_state: _Optional[bytes] = ...) -> None: ...

class PushAck(_message.Message):
    __slots__ = ("seq", "code", "message", "accepted", "received_total", "duplicate")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    seq: int
    code: int
    message: str
    accepted: int
    received_total: int
    duplicate: bool
    def __init__(self, seq: _Optional[int] = ..., code: _Optional[int] = ..., message: _Optional[str] = ..., accepted: _Optional[int] = ..., received_total: _Optional[int] = ..., duplicate: _Optional[bool] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("actor_id", "have_version")
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    HAVE_VERSION_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    have_version: int
    def __init__(self, actor_id: _Optional[str] = ..., have_version: _Optional[int] = ...) -> None: ...

class Tensor(_message.Message):
    __slots__ = ("name", "shape", "data")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    name: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    def __init__(self, name: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ...) -> None: ...

class PolicyWeights(_message.Message):
    __slots__ = ("version", "tensors", "log_std_min", "log_std_max", "arch", "obs_mean", "obs_std", "obs_clip", "conv_strides")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    LOG_STD_MIN_FIELD_NUMBER: _ClassVar[int]
    LOG_STD_MAX_FIELD_NUMBER: _ClassVar[int]
    ARCH_FIELD_NUMBER: _ClassVar[int]
    OBS_MEAN_FIELD_NUMBER: _ClassVar[int]
    OBS_STD_FIELD_NUMBER: _ClassVar[int]
    OBS_CLIP_FIELD_NUMBER: _ClassVar[int]
    CONV_STRIDES_FIELD_NUMBER: _ClassVar[int]
    version: int
    tensors: _containers.RepeatedCompositeFieldContainer[Tensor]
    log_std_min: float
    log_std_max: float
    arch: str
    obs_mean: _containers.RepeatedScalarFieldContainer[float]
    obs_std: _containers.RepeatedScalarFieldContainer[float]
    obs_clip: float
    conv_strides: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, version: _Optional[int] = ..., tensors: _Optional[_Iterable[_Union[Tensor, _Mapping]]] = ..., log_std_min: _Optional[float] = ..., log_std_max: _Optional[float] = ..., arch: _Optional[str] = ..., obs_mean: _Optional[_Iterable[float]] = ..., obs_std: _Optional[_Iterable[float]] = ..., obs_clip: _Optional[float] = ..., conv_strides: _Optional[_Iterable[int]] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LearnerStatus(_message.Message):
    __slots__ = ("learner_id", "policy_version", "updates", "received", "inserted", "rejected_batches", "replay_size", "replay_capacity", "updates_per_s", "inserts_per_s", "mean_policy_lag", "bytes_received", "gpu_mem_allocated", "gpu_mem_reserved", "device", "losses", "frames_received", "rows_unresolved", "insert_failures", "rows_failed")
    class LossesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    LEARNER_ID_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    INSERTED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_BATCHES_FIELD_NUMBER: _ClassVar[int]
    REPLAY_SIZE_FIELD_NUMBER: _ClassVar[int]
    REPLAY_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    UPDATES_PER_S_FIELD_NUMBER: _ClassVar[int]
    INSERTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    MEAN_POLICY_LAG_FIELD_NUMBER: _ClassVar[int]
    BYTES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    GPU_MEM_ALLOCATED_FIELD_NUMBER: _ClassVar[int]
    GPU_MEM_RESERVED_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    LOSSES_FIELD_NUMBER: _ClassVar[int]
    FRAMES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    ROWS_UNRESOLVED_FIELD_NUMBER: _ClassVar[int]
    INSERT_FAILURES_FIELD_NUMBER: _ClassVar[int]
    ROWS_FAILED_FIELD_NUMBER: _ClassVar[int]
    learner_id: str
    policy_version: int
    updates: int
    received: int
    inserted: int
    rejected_batches: int
    replay_size: int
    replay_capacity: int
    updates_per_s: float
    inserts_per_s: float
    mean_policy_lag: float
    bytes_received: int
    gpu_mem_allocated: int
    gpu_mem_reserved: int
    device: str
    losses: _containers.ScalarMap[str, float]
    frames_received: int
    rows_unresolved: int
    insert_failures: int
    rows_failed: int
    def __init__(self, learner_id: _Optional[str] = ..., policy_version: _Optional[int] = ..., updates: _Optional[int] = ..., received: _Optional[int] = ..., inserted: _Optional[int] = ..., rejected_batches: _Optional[int] = ..., replay_size: _Optional[int] = ..., replay_capacity: _Optional[int] = ..., updates_per_s: _Optional[float] = ..., inserts_per_s: _Optional[float] = ..., mean_policy_lag: _Optional[float] = ..., bytes_received: _Optional[int] = ..., gpu_mem_allocated: _Optional[int] = ..., gpu_mem_reserved: _Optional[int] = ..., device: _Optional[str] = ..., losses: _Optional[_Mapping[str, float]] = ..., frames_received: _Optional[int] = ..., rows_unresolved: _Optional[int] = ..., insert_failures: _Optional[int] = ..., rows_failed: _Optional[int] = ...) -> None: ...
