# Each stack's runs are split into execution.shards jobs (scattergather); each shard job
# opens its own model endpoint and checkpoints every finished run outside the declared
# outputs, so a killed or retried job resumes where it stopped.
scattergather:
    execute=config["execution"]["shards"],


# A framework's own environment (mastif.execution.frameworkenv), built from its lock on the
# machine that runs the workflow (a local rule: cluster nodes need no network) before any of
# its stack jobs; the output lists what the environment holds.
rule framework_env:
    input:
        lock=get_framework_lock,
    output:
        packages=results.framework_env(),
    log:
        "logs/framework_env/{framework}.log",
    localrule: True
    script:
        "../scripts/build_framework_env.py"


rule execute_stack:
    input:
        tasks=results.tasks(),
        # the stack's agents run in their framework's environment (mastif.execution.stack_worker)
        framework_env=get_framework_env_record,
        prompts=get_prompt_files,
        sandbox=get_sandbox_files,
        model_files=get_model_files,
    output:
        runs=results.shard(),
    log:
        run="logs/execute_stack/{model}/{protocol}/{framework}/{scatteritem}.log",
        server="logs/execute_stack/{model}/{protocol}/{framework}/{scatteritem}.server.log",
    # a local model's runs before any stack's judging and tagging (see the function)
    priority: get_execute_priority()
    retries: config["execution"]["job_retries"]
    # a local model's server computes with the job's threads (unless the model's
    # options.n_threads): the job has the machine to itself (timing_lock), so all of
    # profiles/default's 2 cores; --set-threads execute_stack=N elsewhere. A remote
    # model's job needs one core for its harness.
    threads: get_execute_threads
    resources:
        local_model_slots=get_execute_resources("local_model_slots"),
        remote_model_slots=get_execute_resources("remote_model_slots"),
        # CT is measured here: a local model's job holds all of timing_lock
        # (profiles/default), so no judge, embedding or other model job shares the CPUs
        # with its runs and its server
        timing_lock=get_execute_resources("timing_lock"),
    # every config key the job reads (tests/pipeline/test_rule_params.py checks them against the
    # schema); execution.progress only draws on stderr and is read from the config
    params:
        experiment=config["experiment"],
        model_spec=get_model_spec,
        prompt_format=get_prompt_format,
        generation=config["generation"],
        repeats=config["repeats"],
        tools=config["tools"],
        web=config["web"],
        web_options=config["web_options"],
        workflow=config["workflow"],
        # recorded as each run's sampling_seed
        sampling_seed=config["tasks"]["seed"],
        execution=get_stack_execution(),
        checkpoint=results.checkpoint(),
    script:
        "../scripts/execute_stack.py"


rule gather_runs:
    input:
        # the stack's wildcards stay: only {scatteritem} is expanded
        shards=gather.execute(results.shard(), allow_missing=True),
    output:
        runs=results.runs(),
    log:
        "logs/gather_runs/{model}/{protocol}/{framework}.log",
    # a stack's downstream jobs go before the next stack's runs: its judging and tagging
    # start as soon as its runs exist (they overlap execution where resources allow; a
    # local model's runs go first, get_execute_priority)
    priority: 10
    localrule: True
    script:
        "../scripts/gather_runs.py"
